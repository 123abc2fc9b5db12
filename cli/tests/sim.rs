//! End-to-end tests of `lifeline sim`, running the built binary.

use std::io::{BufRead, BufReader};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

fn lifeline(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lifeline"))
        .args(args)
        .output()
        .expect("run lifeline")
}

/// Runs `lifeline sim flood ARGS`, asserts success, returns stdout.
fn flood(args: &[&str]) -> String {
    let out = lifeline(&[&["sim", "flood"], args].concat());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{args:?} failed: {stderr}");
    String::from_utf8(out.stdout).unwrap()
}

/// The JSON record on the last line of `stdout`.
fn last_json(stdout: &str) -> Value {
    let last = stdout.lines().last().expect("no output");
    serde_json::from_str(last).unwrap_or_else(|e| panic!("last line {last:?}: {e}"))
}

#[test]
fn fault_free_flood_json() {
    let out = flood(&["--ranks", "100", "--radix", "3", "--seed", "5", "--json"]);
    assert_eq!(out.lines().count(), 1, "{out}");
    let v = last_json(&out);
    assert_eq!(v["ranks"], 100);
    assert_eq!(v["frames"], 99);
    assert_eq!(v["delivered"], 100);
    assert_eq!(v["crashed"], 0);
    assert!(v["events"].as_u64().unwrap() >= 99);
    assert!(v["virtual_ms"].as_f64().unwrap() > 0.0);
    assert!(v["wall_ms"].as_f64().unwrap() >= 0.0);
    let keys = [
        "ranks",
        "frames",
        "events",
        "delivered",
        "crashed",
        "virtual_ms",
        "wall_ms",
    ];
    assert_eq!(v.as_object().unwrap().len(), keys.len());
    let line = out.trim_end();
    let at: Vec<usize> = keys
        .iter()
        .map(|k| line.find(&format!("\"{k}\":")).unwrap())
        .collect();
    assert!(at.windows(2).all(|w| w[0] < w[1]), "key order: {line}");
}

#[test]
fn fault_free_flood_summary() {
    let out = flood(&["--ranks", "100", "--radix", "3", "--seed", "5"]);
    assert_eq!(out.lines().count(), 1, "{out}");
    for part in [
        "100 ranks",
        "99 frames",
        "100 deliveries",
        "0 crashed",
        "virtual time",
        "wall",
    ] {
        assert!(out.contains(part), "summary lacks {part:?}: {out}");
    }
}

#[test]
fn faulty_floods_succeed() {
    for seed in ["1", "2", "3", "4"] {
        let out = flood(&[
            "--ranks", "60", "--radix", "3", "--seed", seed, "--faults", "--json",
        ]);
        let v = last_json(&out);
        assert_eq!(v["ranks"], 60, "seed {seed}");
        assert!(v["crashed"].as_u64().unwrap() >= 1, "seed {seed}: {v}");
        // Several floods ran; the last one reached every survivor.
        assert!(v["delivered"].as_u64().unwrap() >= 60 - v["crashed"].as_u64().unwrap());
    }
}

/// The trace lines of a run: stdout without its last line (the summary, which has a wall time).
fn trace(seed: &str) -> Vec<String> {
    let out = flood(&[
        "--ranks", "60", "--radix", "3", "--seed", seed, "--faults", "--trace",
    ]);
    let mut lines: Vec<String> = out.lines().map(str::to_owned).collect();
    let summary = lines.pop().unwrap();
    assert!(summary.starts_with("flood: 60 ranks"), "{summary}");
    lines
}

#[test]
fn trace_is_deterministic_per_seed() {
    let a = trace("7");
    assert!(a.len() > 100, "trace too short: {}", a.len());
    assert!(a.iter().any(|l| l.contains("deliver")));
    assert!(a.iter().any(|l| l.contains("fault")));
    assert_eq!(a, trace("7"), "same seed, same trace");
    assert_ne!(a, trace("8"), "another seed, another trace");
}

#[test]
fn trace_goes_before_the_json_line() {
    let out = flood(&["--ranks", "20", "--radix", "2", "--trace", "--json"]);
    let v = last_json(&out);
    assert_eq!(v["frames"], 19);
    assert!(out.lines().count() > 20);
}

#[test]
fn closed_pipe_is_not_an_error() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_lifeline"))
        .args(["sim", "flood", "--ranks", "3000", "--radix", "4", "--trace"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(!first.is_empty());
    // The reader is gone: the rest of the trace hits a closed pipe.
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.is_empty(), "{stderr}");
}

#[test]
fn bad_arguments_exit_2() {
    for (args, needle) in [
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
            &["--ranks", "10", "--radix", "1025"][..],
            "--radix 1025 is out of range",
        ),
        (&["--ranks", "-1"][..], "--ranks"),
        (&["--radix", "4"][..], "--ranks"),
        (&["--ranks", "10", "--seed", "x"][..], "--seed"),
    ] {
        let out = lifeline(&[&["sim", "flood"], args].concat());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    for args in [&["sim"][..], &["sim", "nope"][..]] {
        assert_eq!(lifeline(args).status.code(), Some(2), "{args:?}");
    }
}
