//! End-to-end tests of `lifeline sim relm`, running the built binary.

use std::process::{Command, Output};

use serde_json::Value;

fn lifeline(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lifeline"))
        .args(args)
        .output()
        .expect("run lifeline")
}

/// Runs `lifeline sim relm ARGS`, asserts success, returns stdout.
fn relm(args: &[&str]) -> String {
    let out = lifeline(&[&["sim", "relm"], args].concat());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{args:?} failed: {stderr}");
    String::from_utf8(out.stdout).unwrap()
}

/// The JSON record on the last line of `stdout`.
fn last_json(stdout: &str) -> Value {
    let last = stdout.lines().last().expect("no output");
    serde_json::from_str(last).unwrap_or_else(|e| panic!("last line {last:?}: {e}"))
}

/// The keys `sim relm --json` promises, first and in this order.
const CONTRACT_KEYS: [&str; 10] = [
    "ranks",
    "messages",
    "crashed",
    "delivered",
    "duplicates",
    "out_of_order",
    "lost",
    "failed_reported",
    "ctl_frames_per_msg_hop",
    "leaked_entries",
];

/// The diagnostics that follow them, in this order.
const EXTRA_KEYS: [&str; 7] = [
    "replays",
    "retry_probes",
    "gate_timeouts",
    "unreported",
    "virtual_ms",
    "events",
    "wall_ms",
];

/// The last line holds exactly the contract keys first, in order, then the diagnostics.
fn assert_key_order(stdout: &str) {
    let line = stdout.lines().last().unwrap();
    let v = last_json(stdout);
    let obj = v.as_object().unwrap();
    assert_eq!(obj.len(), CONTRACT_KEYS.len() + EXTRA_KEYS.len(), "{line}");
    let at: Vec<usize> = CONTRACT_KEYS
        .iter()
        .chain(&EXTRA_KEYS)
        .map(|k| {
            line.find(&format!("\"{k}\":"))
                .unwrap_or_else(|| panic!("no {k}: {line}"))
        })
        .collect();
    assert!(at.windows(2).all(|w| w[0] < w[1]), "key order: {line}");
    assert!(line.starts_with(r#"{"ranks":"#), "{line}");
}

/// Nothing duplicated, reordered, lost, unreported or leaked.
fn assert_invariants_held(v: &Value) {
    for k in [
        "duplicates",
        "out_of_order",
        "lost",
        "unreported",
        "leaked_entries",
    ] {
        assert_eq!(v[k], 0, "{k}: {v}");
    }
}

#[test]
fn failure_free_json() {
    let out = relm(&[
        "--ranks",
        "64",
        "--radix",
        "4",
        "--messages",
        "300",
        "--seed",
        "3",
        "--json",
    ]);
    assert_eq!(out.lines().count(), 1, "{out}");
    assert_key_order(&out);
    let v = last_json(&out);
    assert_eq!(v["ranks"], 64);
    assert_eq!(v["messages"], 300);
    assert_eq!(v["crashed"], 0);
    assert_eq!(v["delivered"], 300);
    assert_eq!(v["failed_reported"], 0);
    assert_eq!(v["retry_probes"], 0);
    assert_invariants_held(&v);
    let per_hop = v["ctl_frames_per_msg_hop"].as_f64().unwrap();
    assert!((1.0..3.0).contains(&per_hop), "{v}");
    assert!(v["virtual_ms"].as_f64().unwrap() > 0.0);
    assert!(v["events"].as_u64().unwrap() > 300);
    assert!(v["wall_ms"].as_f64().unwrap() >= 0.0);
}

#[test]
fn burst_with_crashes_over_seeds() {
    for seed in ["1", "2", "3"] {
        for burst in [false, true] {
            let mut args = vec![
                "--ranks",
                "40",
                "--radix",
                "3",
                "--messages",
                "200",
                "--crash",
                "0.05",
                "--seed",
                seed,
                "--json",
            ];
            if burst {
                args.push("--burst");
            }
            let out = relm(&args);
            assert_key_order(&out);
            let v = last_json(&out);
            assert_eq!(v["ranks"], 40, "{args:?}");
            assert_eq!(v["crashed"], 2, "{args:?}: {v}");
            assert_eq!(v["messages"], 200, "{args:?}: {v}");
            assert!(v["delivered"].as_u64().unwrap() <= 200, "{args:?}: {v}");
            assert_invariants_held(&v);
        }
    }
}

#[test]
fn defaults_and_summary() {
    // Defaults: radix 64, 1000 messages, no crash, seed 1, one message every 5 us.
    let out = relm(&["--ranks", "80"]);
    assert_eq!(out.lines().count(), 1, "{out}");
    for part in [
        "relm: 80 ranks",
        "radix 64",
        "seed 1",
        "1000 messages one every 5 us",
        "no rank crashed",
        "delivered exactly once, in order, and acknowledged",
        "1000 deliveries",
        "0 duplicates",
        "0 lost",
        "frames per message per hop",
        "0 entries leaked",
        "virtual time",
        "wall",
    ] {
        assert!(out.contains(part), "summary lacks {part:?}: {out}");
    }
    let out = relm(&[
        "--ranks",
        "100",
        "--radix",
        "3",
        "--messages",
        "50",
        "--crash",
        "0.05",
        "--burst",
    ]);
    assert!(
        out.contains("5 of 100 ranks crashed (--crash 0.05)"),
        "{out}"
    );
    assert!(out.contains("50 messages all at once"), "{out}");
}

/// The trace lines of a run: stdout without its last line (the summary, which has a wall time).
fn trace(seed: &str) -> Vec<String> {
    let out = relm(&[
        "--ranks",
        "30",
        "--radix",
        "3",
        "--messages",
        "40",
        "--crash",
        "0.1",
        "--seed",
        seed,
        "--trace",
    ]);
    let mut lines: Vec<String> = out.lines().map(str::to_owned).collect();
    let summary = lines.pop().unwrap();
    assert!(summary.starts_with("relm: 30 ranks"), "{summary}");
    lines
}

#[test]
fn trace_is_deterministic_per_seed() {
    let a = trace("7");
    assert!(a.len() > 100, "trace too short: {}", a.len());
    assert!(
        a.iter().any(|l| l.contains("fault    Crash")),
        "no crash traced"
    );
    assert_eq!(a, trace("7"), "same seed, same trace");
    assert_ne!(a, trace("8"), "another seed, another trace");
}

#[test]
fn trace_goes_before_the_json_line() {
    let out = relm(&[
        "--ranks",
        "20",
        "--radix",
        "2",
        "--messages",
        "10",
        "--trace",
        "--json",
    ]);
    assert!(out.lines().count() > 20, "{out}");
    assert_key_order(&out);
    let v = last_json(&out);
    assert_eq!(v["delivered"], 10);
}

/// The replay command a failure prints must run as printed and reproduce the run's trace.
#[test]
fn replay_command_runs() {
    use lifeline_core::sim::scenario::relm::RelmParams;
    for burst in [false, true] {
        let p = RelmParams {
            ranks: 30,
            radix: 3,
            messages: 40,
            crash: 0.1,
            seed: 7,
            burst,
        };
        let cmd = p.replay_command();
        let (cargo, args) = cmd.split_once(" -- ").expect("cargo run ... -- ARGS");
        assert_eq!(cargo, "cargo run --release -p lifeline-cli", "{cmd}");
        let args: Vec<&str> = args.split_whitespace().collect();
        assert_eq!(&args[..2], ["sim", "relm"], "{cmd}");
        assert!(args.contains(&"--trace"), "{cmd}");
        assert_eq!(args.contains(&"--burst"), burst, "{cmd}");
        let mut direct = vec![
            "--ranks",
            "30",
            "--radix",
            "3",
            "--messages",
            "40",
            "--crash",
            "0.1",
            "--seed",
            "7",
            "--trace",
        ];
        if burst {
            direct.push("--burst");
        }
        // Trace lines only: the summary line has a wall time.
        let strip = |s: String| -> Vec<String> {
            s.lines()
                .filter(|l| !l.starts_with("relm:"))
                .map(str::to_owned)
                .collect()
        };
        let replayed = strip(relm(&args[2..]));
        assert!(replayed.len() > 100, "{cmd}");
        assert_eq!(replayed, strip(relm(&direct)), "{cmd}");
    }
    // A failure-free parameter set prints `--crash 0`, which must parse too.
    let p = RelmParams {
        ranks: 10,
        radix: 2,
        messages: 3,
        crash: 0.0,
        seed: 1,
        burst: false,
    };
    let cmd = p.replay_command();
    let args: Vec<&str> = cmd
        .split_once(" -- ")
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    let out = relm(&args[2..]);
    assert!(out.lines().count() > 10, "{cmd}: {out}");
}

#[test]
fn bad_crash_is_a_clear_usage_error() {
    for (crash, needle) in [
        ("0.9", "--crash 0.9 is out of range (0..=0.5)"),
        ("0.51", "--crash 0.51 is out of range (0..=0.5)"),
        ("-0.1", "--crash -0.1 is out of range (0..=0.5)"),
        ("nan", "--crash NaN is out of range (0..=0.5)"),
        ("inf", "--crash inf is out of range (0..=0.5)"),
        ("x", "--crash"),
        ("", "--crash"),
    ] {
        let out = lifeline(&["sim", "relm", "--ranks", "40", "--crash", crash]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "--crash {crash:?}: {stderr}");
        assert!(stderr.contains(needle), "--crash {crash:?}: {stderr}");
        assert!(out.stdout.is_empty(), "--crash {crash:?}");
    }
}

#[test]
fn other_bad_arguments_exit_2() {
    for (args, needle) in [
        (&["--ranks", "1"][..], "--ranks 1 is out of range for RELM"),
        (&["--ranks", "0"][..], "--ranks 0 is out of range"),
        (
            &["--ranks", "4294967293"][..],
            "--ranks 4294967293 is out of range",
        ),
        (
            &["--ranks", "10", "--radix", "1"][..],
            "--radix 1 is out of range",
        ),
        (
            &["--ranks", "10", "--messages", "0"][..],
            "--messages 0 is out of range",
        ),
        (
            &["--ranks", "10", "--messages", "4294967296"][..],
            "--messages 4294967296 is out of range",
        ),
        (&["--messages", "3"][..], "--ranks"),
        (&["--ranks", "10", "--seed", "x"][..], "--seed"),
        (&["--ranks", "10", "--burst", "yes"][..], "yes"),
    ] {
        let out = lifeline(&[&["sim", "relm"], args].concat());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}
