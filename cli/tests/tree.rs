//! End-to-end tests of `lifeline tree`, running the built binary.

use std::io::Read;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn lifeline(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lifeline"))
        .args(args)
        .output()
        .expect("run lifeline")
}

/// Runs `lifeline tree ARGS`, asserts success and a quiet stderr, returns stdout.
fn tree(args: &[&str]) -> String {
    let out = lifeline(&[&["tree"], args].concat());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{args:?} failed: {stderr}");
    assert!(stderr.is_empty(), "{args:?} wrote to stderr: {stderr}");
    String::from_utf8(out.stdout).unwrap()
}

/// The JSON line for `rank` in the whole n=9, radix-2 tree with `failed` dead.
fn json9(failed: &str, rank: usize) -> String {
    let out = tree(&[
        "--ranks", "9", "--radix", "2", "--failed", failed, "--format", "json",
    ]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 9);
    lines[rank].to_owned()
}

fn children(line: &str) -> serde_json::Value {
    serde_json::from_str::<serde_json::Value>(line).unwrap()["children"].clone()
}

#[test]
fn base_tree_radix2_n9() {
    let expected: [&[u64]; 9] = [&[1, 2], &[3, 5], &[4, 6], &[7], &[8], &[], &[], &[], &[]];
    for (r, kids) in expected.iter().enumerate() {
        assert_eq!(children(&json9("", r)), serde_json::json!(kids), "rank {r}");
    }
    assert_eq!(
        json9("", 0),
        r#"{"rank":0,"alive":true,"slot":0,"parent":null,"children":[1,2],"depth":0}"#
    );
    assert_eq!(
        json9("", 7),
        r#"{"rank":7,"alive":true,"slot":7,"parent":3,"children":[],"depth":3}"#
    );
}

#[test]
fn failures_3_7_8_leave_an_empty_slot() {
    assert_eq!(
        json9("3,7:8", 1),
        r#"{"rank":1,"alive":true,"slot":1,"parent":0,"children":[null,5],"depth":1}"#
    );
    assert_eq!(children(&json9("3,7:8", 4)), serde_json::json!([]));
    assert_eq!(
        json9("3,7:8", 3),
        r#"{"rank":3,"alive":false,"slot":null,"parent":null,"children":[],"depth":null}"#
    );
}

#[test]
fn failure_1_promotes_5() {
    assert_eq!(
        json9("1", 5),
        r#"{"rank":5,"alive":true,"slot":1,"parent":0,"children":[3],"depth":1}"#
    );
    assert_eq!(children(&json9("1", 0)), serde_json::json!([5, 2]));
    let text = tree(&["--ranks", "9", "--radix", "2", "--failed", "1"]);
    assert!(text.starts_with("# span 9, radix 2, failed 1"), "{text}");
    assert!(text.contains("\nrank 5: slot 1 depth 1 parent 0 children [3]\n"));
    assert!(text.contains("\nrank 1: dead\n"));
    assert!(text.contains("\nrank 0: slot 0 depth 0 parent - children [5, 2]\n"));
}

#[test]
fn failures_4_6_promote_8() {
    assert_eq!(
        json9("4,6", 8),
        r#"{"rank":8,"alive":true,"slot":4,"parent":2,"children":[],"depth":2}"#
    );
    assert_eq!(children(&json9("4,6", 2)), serde_json::json!([8]));
}

#[test]
fn single_rank_matches_full_output() {
    let args = ["--ranks", "40", "--radix", "3", "--failed", "0,4:6,13"];
    let all = tree(&[&args[..], &["--format", "json"]].concat());
    for (r, line) in all.lines().enumerate() {
        let one = tree(&[&args[..], &["--format", "json", "--rank", &r.to_string()]].concat());
        assert_eq!(one, format!("{line}\n"));
    }
    let text = tree(&[&args[..], &["--rank", "5"]].concat());
    assert_eq!(text.lines().nth(1), Some("rank 5: dead"));
}

#[test]
fn json_keys_in_order_and_views_consistent() {
    let out = tree(&[
        "--ranks",
        "300",
        "--radix",
        "4",
        "--failed",
        "0:2,9,40:80",
        "--format",
        "json",
    ]);
    let views: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    for (line, v) in out.lines().zip(&views) {
        let keys = ["rank", "alive", "slot", "parent", "children", "depth"];
        let at: Vec<usize> = keys
            .iter()
            .map(|k| line.find(&format!("\"{k}\":")).unwrap())
            .collect();
        assert!(at.windows(2).all(|w| w[0] < w[1]), "{line}");
        for c in v["children"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|c| c.as_u64())
        {
            let child = &views[c as usize];
            assert_eq!(child["parent"], v["rank"], "{line}");
            assert_eq!(child["depth"].as_u64(), v["depth"].as_u64().map(|d| d + 1));
        }
    }
    let roots = views.iter().filter(|v| v["depth"] == 0).count();
    assert_eq!(roots, 1);
}

#[test]
fn dot_draws_the_live_tree() {
    let dot = tree(&[
        "--ranks", "9", "--radix", "2", "--failed", "1", "--format", "dot",
    ]);
    assert!(dot.starts_with("digraph lifeline {"), "{dot}");
    assert!(dot.trim_end().ends_with('}'));
    assert_eq!(dot.matches('{').count(), dot.matches('}').count());
    assert!(dot.contains("  5 [label=\"5 (slot 1)\"];"));
    assert!(dot.contains("  0 -> 5;") && dot.contains("  5 -> 3;"));
    assert!(dot.contains("  1 [label=\"1 (dead)\""));
    assert_eq!(dot.matches(" -> ").count(), 7, "8 live ranks, 7 edges");

    let one = tree(&[
        "--ranks", "9", "--radix", "2", "--failed", "1", "--format", "dot", "--rank", "3",
    ]);
    assert!(one.starts_with("digraph"));
    assert_eq!(one.matches('{').count(), one.matches('}').count());
    let edges: Vec<&str> = one.lines().filter(|l| l.contains("->")).collect();
    assert_eq!(edges, ["  0 -> 5;", "  5 -> 3;", "  3 -> 7;"]);
}

#[test]
fn defaults_are_radix_64_and_text() {
    let out = tree(&["--ranks", "70"]);
    assert!(
        out.starts_with("# span 70, radix 64, failed none\n"),
        "{out}"
    );
    assert_eq!(out.lines().count(), 71);
    assert!(out.contains("\nrank 65: slot 65 depth 2 parent 1 children []\n"));
}

#[test]
fn bad_input_exits_2_with_a_message() {
    let cases: &[&[&str]] = &[
        &["--ranks", "9", "--radix", "1"],
        &["--ranks", "9", "--radix", "1025"],
        &["--ranks", "9", "--radix", "99999999999"],
        &["--ranks", "0"],
        &["--ranks", "4294967293"],
        &["--ranks", "99999999999"],
        &["--ranks", "-1"],
        &["--ranks", "abc"],
        &["--radix", "2"],
        &["--ranks", "9", "--rank", "9"],
        &["--ranks", "9", "--rank", "99999999999"],
        &["--ranks", "9", "--failed", "9"],
        &["--ranks", "9", "--failed", "2,x"],
        &["--ranks", "9", "--failed", "5:3"],
        &["--ranks", "9", "--failed", "1,,2"],
        &["--ranks", "9", "--failed", "1-3"],
        &["--ranks", "9", "--failed", "4294967296"],
        &["--ranks", "9", "--format", "xml"],
        &["--ranks", "100001"],
    ];
    for args in cases {
        let out = lifeline(&[&["tree"], *args].concat());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(!stderr.trim().is_empty(), "{args:?}: empty stderr");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}: wrote to stdout");
    }
}

#[test]
fn all_ranks_refused_above_100000() {
    let out = lifeline(&["tree", "--ranks", "100001", "--radix", "2"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("100001") && stderr.contains("--rank"),
        "{stderr}"
    );

    let all = tree(&["--ranks", "100000", "--radix", "2", "--format", "json"]);
    assert_eq!(all.lines().count(), 100_000);
}

#[test]
fn one_rank_of_a_huge_tree_is_quick() {
    let start = Instant::now();
    let out = tree(&[
        "--ranks", "1000000", "--radix", "2", "--failed", "0:1000", "--rank", "999999",
    ]);
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "took {:?}",
        start.elapsed()
    );
    assert!(
        out.lines()
            .nth(1)
            .unwrap()
            .starts_with("rank 999999: slot "),
        "{out}"
    );

    let out = tree(&[
        "--ranks",
        "4294967292",
        "--radix",
        "1024",
        "--rank",
        "4294967291",
        "--format",
        "json",
    ]);
    assert!(
        out.starts_with(r#"{"rank":4294967291,"alive":true,"#),
        "{out}"
    );
}

#[test]
fn closed_pipe_is_not_an_error() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_lifeline"))
        .args(["tree", "--ranks", "100000", "--radix", "2"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut head = [0u8; 64];
    child.stdout.take().unwrap().read_exact(&mut head).unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}: {stderr}", out.status);
    assert!(stderr.is_empty(), "{stderr}");
}
