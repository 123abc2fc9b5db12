//! End-to-end tests of `lifeline sim membership`, running the built binary: the JSON contract,
//! the oracle's verdict, the SVG CDF, replay determinism and bad arguments.

use std::process::{Command, Output};

use serde_json::Value;

fn lifeline(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lifeline"))
        .args(args)
        .output()
        .expect("run lifeline")
}

fn last_json(out: &Output) -> Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().last().expect("no output");
    serde_json::from_str(last).unwrap_or_else(|e| panic!("last line {last:?}: {e}"))
}

#[test]
fn json_reports_no_wrongful_eviction_and_every_loss_removed_with_a_cdf() {
    let svg = std::env::temp_dir().join(format!("lifeline-cdf-{}.svg", std::process::id()));
    let out = lifeline(&[
        "sim",
        "membership",
        "--ranks",
        "128",
        "--radix",
        "8",
        "--seeds",
        "4",
        "--json",
        "--svg",
        svg.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j = last_json(&out);
    for key in [
        "silent_detect_ms_p50",
        "silent_detect_ms_p99",
        "silent_detect_ms_max",
        "hard_detect_ms_p50",
        "hard_detect_ms_p99",
        "hard_detect_ms_max",
        "wrongful_evictions",
        "lossy",
        "lossy_removed",
        "lossy_accusations",
        "lossy_coordinator_decisions",
        "silent_incl_lossy_coordinator_ms_p99",
        "view_changes",
        "frames_per_view_change",
        "removal_frames_per_view_change",
    ] {
        assert!(j.get(key).is_some(), "missing {key}: {j}");
    }
    assert_eq!(j["runs"], 4);
    assert_eq!(
        j["faulty"], 12,
        "a silent loss, a crash and a long pause per run"
    );
    assert_eq!(j["wrongful_evictions"], 0);
    assert_eq!(j["missed_removals"], 0);
    assert_eq!(j["evicted_told"], 4);
    assert_eq!(j["lossy"], 4, "one lossy rank per run");
    let p99 = j["silent_detect_ms_p99"].as_f64().unwrap();
    assert!(p99 > 200.0 && p99 <= 500.0, "silent p99 {p99}");
    assert!(j["hard_detect_ms_max"].as_f64().unwrap() <= 20.0, "{j}");
    assert!(j["view_changes"].as_u64().unwrap() >= 4);
    let text = std::fs::read_to_string(&svg).unwrap();
    let _ = std::fs::remove_file(&svg);
    assert!(
        text.starts_with("<svg") && text.contains("silent loss (n = 8)"),
        "{}",
        &text[..200]
    );
}

#[test]
fn a_seed_replays_exactly_and_bad_arguments_are_usage_errors() {
    let args = [
        "sim",
        "membership",
        "--ranks",
        "64",
        "--radix",
        "4",
        "--seed",
        "9",
        "--json",
    ];
    let strip = |v: Value| {
        let mut v = v;
        v.as_object_mut().unwrap().remove("wall_ms");
        v
    };
    let a = strip(last_json(&lifeline(&args)));
    let b = strip(last_json(&lifeline(&args)));
    assert_eq!(a, b);
    let bad = lifeline(&["sim", "membership", "--ranks", "8", "--seeds", "1"]);
    assert!(!bad.status.success());
    let bad = lifeline(&["sim", "membership", "--loss-pct", "101"]);
    assert_eq!(bad.status.code(), Some(2));
    let bad = lifeline(&["sim", "membership", "--seeds", "0"]);
    assert_eq!(
        bad.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
}
