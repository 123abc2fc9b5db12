//! End-to-end tests of `lifeline sim partition`, running the built binary: the summary (a JSON
//! last line) does not depend on `--jobs`, a failing seed's replay line reproduces its
//! verdict, and a passing seed exits 0.

use std::process::{Command, Output};

use serde_json::Value;

fn lifeline(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lifeline"))
        .args(args)
        .output()
        .expect("run lifeline")
}

/// The JSON last line of stdout, without its wall time.
fn summary(out: &Output) -> Value {
    let text = String::from_utf8_lossy(&out.stdout);
    let last = text.lines().last().expect("a summary line");
    let mut v: Value = serde_json::from_str(last).unwrap_or_else(|e| panic!("{last:?}: {e}"));
    v.as_object_mut()
        .expect("an object")
        .remove("wall_ms")
        .expect("wall_ms");
    v
}

#[test]
fn the_summary_is_the_same_for_any_number_of_jobs_and_failing_seeds_replay() {
    let sweep = |jobs: &str| {
        lifeline(&[
            "sim",
            "partition",
            "--vary",
            "--ranks",
            "32",
            "--seed",
            "1",
            "--seeds",
            "12",
            "--jobs",
            jobs,
            "--json",
        ])
    };
    let one = sweep("1");
    let s1 = summary(&one);
    assert_eq!(s1["runs"], 12, "{s1}");
    assert_eq!(s1["minority_decisions"], 0, "{s1}");
    assert_eq!(s1["safety_violations"], 0, "{s1}");
    let two = sweep("2");
    assert_eq!(s1, summary(&two), "--jobs 1 and --jobs 2 disagree");
    assert_eq!(one.status.code(), two.status.code());
    // Every failing seed is listed with the command that replays it; replayed alone (its shape
    // given, not drawn) it fails the same way.
    let stderr = String::from_utf8_lossy(&one.stderr);
    let failing = s1["violations"].as_u64().expect("violations");
    assert_eq!(
        stderr.matches("replay: ").count() as u64,
        failing,
        "{stderr}"
    );
    assert_eq!(one.status.success(), failing == 0);
    if let Some(line) = stderr.lines().find(|l| l.contains("replay: ")) {
        let cmd = line.split("replay: ").nth(1).expect("a replay command");
        let args: Vec<&str> = cmd
            .split_whitespace()
            .skip_while(|a| *a != "sim")
            .filter(|a| *a != "--trace")
            .chain(["--json"])
            .collect();
        let again = lifeline(&args);
        assert!(!again.status.success(), "{args:?} passed on replay");
        assert_eq!(summary(&again)["violations"], 1, "{args:?}");
    }
}

#[test]
fn a_passing_seed_exits_zero_and_bad_arguments_are_refused() {
    // The shape, 16 ranks radix 8: this seed's plan is a flapping split the majority
    // decides.
    let ok = lifeline(&[
        "sim",
        "partition",
        "--ranks",
        "16",
        "--radix",
        "8",
        "--seed",
        "3",
        "--json",
    ]);
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let s = summary(&ok);
    assert_eq!(
        (s["runs"].as_u64(), s["decided"].as_u64()),
        (Some(1), Some(1)),
        "{s}"
    );
    for bad in [["--seeds", "0"], ["--jobs", "0"], ["--ranks", "4"]] {
        let mut args = vec!["sim", "partition"];
        args.extend(bad);
        let out = lifeline(&args);
        assert!(!out.status.success(), "{bad:?} accepted");
    }
}
