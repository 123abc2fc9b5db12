//! End-to-end tests of `lifeline sim elastic`'s sweep options, running the built binary: a
//! sweep's summary does not depend on `--jobs` (CI runs the sweep with one job per core and
//! a failing seed must replay the same), `--each` prints one line per seed, bad `--jobs`.

use std::process::{Command, Output};

use serde_json::Value;

fn lifeline(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lifeline"))
        .args(args)
        .output()
        .expect("run lifeline")
}

fn lines(out: &Output) -> Vec<Value> {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("line {l:?}: {e}")))
        .collect()
}

fn sweep(jobs: &str, each: bool) -> Vec<Value> {
    let mut args = vec![
        "sim", "elastic", "--vary", "--ranks", "96", "--seed", "40", "--seeds", "6", "--jobs",
        jobs, "--json",
    ];
    if each {
        args.push("--each");
    }
    lines(&lifeline(&args))
}

/// The summary without its wall time (the only field that may differ between runs).
fn summary(mut v: Value) -> Value {
    v.as_object_mut()
        .expect("summary is an object")
        .remove("wall_ms")
        .expect("summary has wall_ms");
    v
}

#[test]
fn the_summary_is_the_same_for_any_number_of_jobs() {
    let one = summary(sweep("1", false).pop().expect("a summary line"));
    assert_eq!(one["runs"], 6, "{one}");
    assert_eq!(one["violations"], 0, "{one}");
    assert!(one["joins"].as_u64().expect("joins") > 6, "{one}");
    for jobs in ["2", "4"] {
        let many = summary(sweep(jobs, false).pop().expect("a summary line"));
        assert_eq!(one, many, "--jobs 1 and --jobs {jobs} disagree");
    }
}

#[test]
fn each_prints_one_line_per_seed_then_the_summary() {
    let mut out = sweep("3", true);
    let last = summary(out.pop().expect("a summary line"));
    assert_eq!(out.len(), 6);
    let mut seeds: Vec<u64> = out
        .iter()
        .map(|l| {
            assert_eq!(l["violations"], 0, "{l}");
            assert!(l["ranks"].as_u64().expect("ranks") >= 24, "{l}");
            l["seed"].as_u64().expect("seed")
        })
        .collect();
    seeds.sort_unstable();
    assert_eq!(seeds, (40..46).collect::<Vec<u64>>());
    let joins: u64 = out
        .iter()
        .map(|l| l["joins"].as_u64().expect("joins"))
        .sum();
    assert_eq!(last["joins"].as_u64(), Some(joins), "{last}");
}

#[test]
fn zero_jobs_is_a_usage_error() {
    let out = lifeline(&["sim", "elastic", "--seeds", "2", "--jobs", "0"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--jobs"));
}
