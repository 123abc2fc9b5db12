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

// ---- sim xcast ----

/// Runs `lifeline sim xcast ARGS`, asserts success, returns stdout.
fn xcast(args: &[&str]) -> String {
    let out = lifeline(&[&["sim", "xcast"], args].concat());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{args:?} failed: {stderr}");
    String::from_utf8(out.stdout).unwrap()
}

/// The keys of `sim xcast --json`, in order.
const XCAST_KEYS: [&str; 10] = [
    "ranks",
    "ops",
    "crashed",
    "frames",
    "delivered_exactly_once",
    "in_order",
    "completions",
    "completion_reported_to_origin",
    "virtual_ms",
    "wall_ms",
];

fn assert_invariants_held(v: &Value) {
    for k in [
        "delivered_exactly_once",
        "in_order",
        "completion_reported_to_origin",
    ] {
        assert_eq!(v[k], true, "{k}: {v}");
    }
}

#[test]
fn root_origin_xcast_json_costs_two_frames_per_edge() {
    let out = xcast(&[
        "--ranks",
        "100",
        "--radix",
        "3",
        "--ops",
        "5",
        "--root-origin",
        "--json",
    ]);
    assert_eq!(out.lines().count(), 1, "{out}");
    let v = last_json(&out);
    assert_eq!(v["ranks"], 100);
    assert_eq!(v["ops"], 5);
    assert_eq!(v["crashed"], 0);
    assert_eq!(v["frames"], 5 * 2 * 99);
    assert_eq!(v["completions"], 5);
    assert_invariants_held(&v);
    assert!(v["virtual_ms"].as_f64().unwrap() > 0.0);
    assert!(v["wall_ms"].as_f64().unwrap() >= 0.0);
    assert_eq!(v.as_object().unwrap().len(), XCAST_KEYS.len(), "{out}");
    let line = out.trim_end();
    let at: Vec<usize> = XCAST_KEYS
        .iter()
        .map(|k| line.find(&format!("\"{k}\":")).unwrap())
        .collect();
    assert!(at.windows(2).all(|w| w[0] < w[1]), "key order: {line}");
}

#[test]
fn xcast_defaults_and_summary() {
    // Defaults: radix 64, 10 ops, no crash, seed 1, origins drawn from the seed.
    let out = xcast(&["--ranks", "80"]);
    assert_eq!(out.lines().count(), 1, "{out}");
    for part in [
        "80 ranks",
        "radix 64",
        "seed 1",
        "10 ops",
        "no rank crashed",
        "exactly once: yes",
        "in order: yes",
        "10 completions",
        "frames",
        "virtual time",
        "wall",
    ] {
        assert!(out.contains(part), "summary lacks {part:?}: {out}");
    }
    let out = xcast(&["--ranks", "100", "--radix", "3", "--crash", "0.05"]);
    assert!(out.contains("5 of 100 ranks crashed"), "{out}");
}

#[test]
fn xcast_with_crashes_over_seeds() {
    for seed in ["1", "2", "3", "4", "5"] {
        let out = xcast(&[
            "--ranks", "100", "--radix", "3", "--ops", "8", "--crash", "0.05", "--seed", seed,
            "--json",
        ]);
        let v = last_json(&out);
        assert_eq!(v["ranks"], 100, "seed {seed}");
        assert_eq!(v["crashed"], 5, "seed {seed}: {v}");
        assert_invariants_held(&v);
    }
    // The root's stream too.
    let v = last_json(&xcast(&[
        "--ranks",
        "100",
        "--radix",
        "4",
        "--ops",
        "6",
        "--crash",
        "0.05",
        "--root-origin",
        "--json",
    ]));
    assert_invariants_held(&v);
}

/// The trace lines of an xcast run: stdout without its last line (the summary).
fn xcast_trace(seed: &str) -> Vec<String> {
    let out = xcast(&[
        "--ranks", "60", "--radix", "3", "--ops", "6", "--crash", "0.05", "--seed", seed, "--trace",
    ]);
    let mut lines: Vec<String> = out.lines().map(str::to_owned).collect();
    let summary = lines.pop().unwrap();
    assert!(summary.starts_with("xcast: 60 ranks"), "{summary}");
    lines
}

#[test]
fn xcast_trace_is_deterministic_per_seed() {
    let a = xcast_trace("7");
    assert!(a.len() > 100, "trace too short: {}", a.len());
    assert!(a.iter().any(|l| l.contains("fault    Crash")));
    assert!(a.iter().any(|l| l.contains("deliver")));
    assert_eq!(a, xcast_trace("7"), "same seed, same trace");
    assert_ne!(a, xcast_trace("8"), "another seed, another trace");
}

/// The replay command a failure prints must run as printed and reproduce the run's trace.
#[test]
fn xcast_replay_command_runs() {
    use lifeline_core::sim::scenario::xcast::XcastParams;
    for root_origin in [false, true] {
        let p = XcastParams {
            ranks: 60,
            radix: 3,
            ops: 6,
            crash: 0.05,
            seed: 7,
            root_origin,
        };
        let cmd = p.replay_command();
        let (cargo, args) = cmd.split_once(" -- ").expect("cargo run ... -- ARGS");
        assert_eq!(cargo, "cargo run --release -p lifeline-cli", "{cmd}");
        let args: Vec<&str> = args.split_whitespace().collect();
        assert_eq!(&args[..2], ["sim", "xcast"], "{cmd}");
        let mut direct = vec![
            "--ranks", "60", "--radix", "3", "--ops", "6", "--crash", "0.05", "--seed", "7",
            "--trace",
        ];
        if root_origin {
            direct.push("--root-origin");
        }
        // Trace lines only: the summary line has a wall time.
        let strip = |s: String| -> Vec<String> {
            s.lines()
                .filter(|l| !l.starts_with("xcast:"))
                .map(str::to_owned)
                .collect()
        };
        let replayed = strip(xcast(&args[2..]));
        assert!(replayed.len() > 100, "{cmd}");
        assert_eq!(replayed, strip(xcast(&direct)), "{cmd}");
    }
    // A failure-free parameter set prints `--crash 0`, which must parse too.
    let p = XcastParams {
        ranks: 10,
        radix: 2,
        ops: 1,
        crash: 0.0,
        seed: 1,
        root_origin: true,
    };
    let cmd = p.replay_command();
    let args: Vec<&str> = cmd
        .split_once(" -- ")
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    let out = xcast(&args[2..]);
    assert!(out.lines().count() > 10, "{cmd}: {out}");
}

#[test]
fn xcast_trace_goes_before_the_json_line() {
    let out = xcast(&[
        "--ranks",
        "20",
        "--radix",
        "2",
        "--ops",
        "2",
        "--root-origin",
        "--trace",
        "--json",
    ]);
    let v = last_json(&out);
    assert_eq!(v["frames"], 2 * 2 * 19);
    assert!(out.lines().count() > 40);
}

#[test]
fn xcast_bad_arguments_exit_2() {
    for (args, needle) in [
        (
            &["--ranks", "100", "--crash", "0.9"][..],
            "--crash 0.9 is out of range (0..=0.5)",
        ),
        (
            &["--ranks", "100", "--crash", "-0.1"][..],
            "--crash -0.1 is out of range",
        ),
        (
            &["--ranks", "100", "--crash", "nan"][..],
            "--crash NaN is out of range",
        ),
        (&["--ranks", "100", "--crash", "x"][..], "--crash"),
        (
            &["--ranks", "100", "--radix", "1"][..],
            "--radix 1 is out of range",
        ),
        (
            &["--ranks", "100", "--ops", "0"][..],
            "--ops 0 is out of range",
        ),
        (
            &["--ranks", "100", "--ops", "4294967296"][..],
            "--ops 4294967296 is out of range",
        ),
        (&["--ranks", "0"][..], "--ranks 0 is out of range"),
        (&["--ops", "3"][..], "--ranks"),
        (&["--ranks", "10", "--seed", "x"][..], "--seed"),
    ] {
        let out = lifeline(&[&["sim", "xcast"], args].concat());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}
