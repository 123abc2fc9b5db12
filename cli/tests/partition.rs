//! `lifeline cluster --partition` in real runs: 16 real processes, radix 8, the links between
//! a set of ranks and the rest cut with nftables (two named sets, four rules), the report's
//! `outages` checked for shape and against the nodes' own lines.
//!
//! These need the `nft` binary (Debian's nftables) and root; otherwise each is skipped with
//! one loud line, or fails under `LIFELINE_REQUIRE_NFT=1` (set by `.ci/run`; see `common`).
//! One cluster at a time.
//!
//! What the measurement tests assert holds whatever the membership protocol does: the sets
//! and rules go in with the right members and come out, no op crosses the cut while it is in
//! (checked from the raw node lines, not only the report's `crossed`), every field of the
//! report's sides is filled, and `pass` is false whenever a partition check failed. The
//! outcome issue #23 asks for (the majority continues within 1 s, the minority decides
//! nothing, no majority rank removed, the minority told and exiting with status 3 after the
//! heal) needs quorum failover (#23 item 1) when the minority holds the root: the nodes run
//! `--quorum majority` by default (`docs/quorum.md`), and `majority_continues_and_minority_is_fenced`
//! asserts it. The root alone cut off is tested as well (the other 15 take over).
#![cfg(target_os = "linux")]

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;

mod common;

/// One cluster at a time: the machine may have two cores.
static SERIAL: Mutex<()> = Mutex::new(());

const NODES: u32 = 16;

/// The `nft` binary, found by `can_run`.
fn nft() -> std::path::PathBuf {
    common::find("nft").expect("nft (checked by can_run)")
}

fn can_run(test: &str) -> bool {
    common::tool(test, common::NFT).is_some()
}

/// What `nft list table inet NAME` printed while the run went on (polled every 20 ms until
/// `want` is in it or the run ends), and the run's last stdout line (the report).
struct Run {
    report: Value,
    seen: String,
    lines: Vec<(u32, Value)>,
    ok: bool,
}

/// Runs `lifeline cluster` on 16 nodes (radix 8) with `args`, keeping every node line, and
/// watches its nftables table until `want` shows in it.
fn cluster(args: &[&str], want: &str) -> Run {
    let dir = std::env::temp_dir().join(format!("lifeline-partition-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let lines_path = dir.join("lines");
    let t0 = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_lifeline"))
        .args(["cluster", "--nodes", &NODES.to_string(), "--radix", "8"])
        .args(["--json", "--lines", lines_path.to_str().unwrap()])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run lifeline cluster");
    let table = format!("lifeline_{}", child.id());
    let mut seen = String::new();
    while child.try_wait().unwrap().is_none() {
        if !seen.contains(want) {
            let out = Command::new(nft())
                .args(["list", "table", "inet", &table])
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            if text.contains(want) {
                seen = text;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "the run did not end"
        );
    }
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report: Value = serde_json::from_str(stdout.lines().last().unwrap_or("null"))
        .unwrap_or_else(|e| {
            panic!(
                "{args:?}: {e}: {stdout}\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
    eprintln!(
        "{args:?}: {:.1} s, exit {:?}: {report}",
        t0.elapsed().as_secs_f64(),
        out.status.code()
    );
    let lines = std::fs::read_to_string(&lines_path)
        .unwrap()
        .lines()
        .filter_map(|l| {
            let (r, v) = l.split_once(' ')?;
            Some((r.parse().ok()?, serde_json::from_str(v).ok()?))
        })
        .collect();
    let _ = std::fs::remove_dir_all(&dir);
    // The table is gone with the run.
    let tables = Command::new(nft())
        .args(["list", "tables"])
        .output()
        .unwrap();
    assert!(
        !String::from_utf8_lossy(&tables.stdout).contains(&table),
        "{table} outlived the run"
    );
    Run {
        ok: out.status.success(),
        report,
        seen,
        lines,
    }
}

/// The elements of set `name` in an `nft list table` text, as addresses.
fn set_elements(table: &str, name: &str) -> BTreeSet<String> {
    let at = table
        .find(&format!("set {name} {{"))
        .unwrap_or_else(|| panic!("no set {name} in {table}"));
    let body = &table[at..];
    let body = &body[..body.find('}').unwrap()];
    let elems = &body[body.find("elements = {").expect("elements") + 12..];
    elems
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// Rank R's address (`lifeline cluster` on Linux: 127.0.1.(R+1) for R below 250).
fn addr(r: u32) -> String {
    format!("127.0.1.{}", r + 1)
}

/// Ops started on one side during the cut and delivered on the other before the heal,
/// counted from the node lines themselves: `(xcasts, RELM messages)`.
fn crossings(run: &Run, side: &BTreeSet<u32>, cut: f64, heal: f64) -> (usize, usize) {
    let mut started: BTreeMap<String, (u32, f64)> = BTreeMap::new();
    let mut delivered: Vec<(String, u32, f64, bool)> = Vec::new();
    for (r, v) in &run.lines {
        let t = v["t_ms"].as_f64().unwrap_or(0.0);
        let p = v["payload"].as_str().unwrap_or("").to_string();
        match v["event"].as_str().unwrap_or("") {
            "xcast_started" | "relm_started" => {
                started.insert(p, (*r, t));
            }
            "xcast_delivered" => delivered.push((p, *r, t, false)),
            "relm_delivered" => delivered.push((p, *r, t, true)),
            _ => {}
        }
    }
    let (mut x, mut m) = (0, 0);
    let mut counted = BTreeSet::new();
    for (p, at, t, relm) in delivered {
        let Some((origin, s)) = started.get(&p) else {
            continue;
        };
        let across = side.contains(origin) != side.contains(&at);
        if *s > cut && *s < heal && t < heal && across && counted.insert(p.clone()) {
            if relm {
                m += 1;
            } else {
                x += 1;
            }
        }
    }
    (x, m)
}

/// The report's sides of outage 0: `(minority, majority)`.
fn sides(r: &Value) -> (&Value, &Value) {
    let s = &r["outages"][0]["sides"];
    (&s[0], &s[1])
}

fn ranks(v: &Value) -> Vec<u32> {
    v.as_array()
        .unwrap_or_else(|| panic!("not an array: {v}"))
        .iter()
        .map(|r| r.as_u64().unwrap() as u32)
        .collect()
}

/// The shape every partition report has, whatever the outcome: both sides with their
/// ranks, a boolean `continued`, a `resume_ms` per healthy member, the decisions and
/// removals as lists, a gap for every rank, and `pass` false when a check failed.
fn shape(run: &Run, minority: &[u32]) {
    let r = &run.report;
    assert_eq!(r["pass"] == true, run.ok, "{r}");
    let o = &r["outages"][0];
    let (min, maj) = sides(r);
    assert_eq!(min["role"], "minority", "{o}");
    assert_eq!(maj["role"], "majority", "{o}");
    assert_eq!(ranks(&min["ranks"]), minority, "{o}");
    let majority: Vec<u32> = (0..NODES).filter(|x| !minority.contains(x)).collect();
    assert_eq!(ranks(&maj["ranks"]), majority, "{o}");
    for s in [min, maj] {
        assert!(s["continued"].is_boolean(), "{s}");
        assert!(s["xcast_continued"].is_boolean(), "{s}");
        // A side of one rank has no pair to send RELM messages between.
        let one = s["ranks"].as_array().unwrap().len() == 1;
        assert_eq!(s["relm_continued"].is_null(), one, "{s}");
        assert!(one || s["relm_continued"].is_boolean(), "{s}");
        assert_eq!(
            s["continued"] == true,
            s["xcast_continued"] == true && s["relm_continued"] != false,
            "{s}"
        );
        assert!(
            s["resume_ms"].is_number() || s["resume_ms"].is_null(),
            "{s}"
        );
        let by_rank = s["resume_ms_by_rank"].as_object().unwrap();
        assert_eq!(by_rank.len(), s["ranks"].as_array().unwrap().len(), "{s}");
        assert!(s["decided"].is_array() && s["removed"].is_array(), "{s}");
        assert!(s["resumed_during_cut"].is_boolean(), "{s}");
        assert!(s["gap_ms_max"].is_number(), "{s}");
    }
    // Every rank of the run has its longest gap since the cut, cut off or not.
    assert_eq!(
        o["gap_ms"].as_object().unwrap().len(),
        NODES as usize,
        "{o}"
    );
    let checks = &o["checks"];
    for k in [
        "majority_continued_within_1s",
        "minority_decided_nothing",
        "no_majority_rank_removed",
        "ok",
    ] {
        assert!(checks[k].is_boolean(), "{k}: {o}");
    }
    assert_eq!(checks["ok"], r["outages_ok"], "{r}");
    if checks["ok"] != true {
        assert_eq!(
            r["pass"], false,
            "a failed partition check must fail the run: {r}"
        );
    }
    // A majority that did not continue is no majority that continued within 1 s.
    if maj["continued"] != true {
        assert_eq!(checks["majority_continued_within_1s"], false, "{o}");
    }
}

/// The minority {0..5} (holding the root) cut from the majority {6..15} for 4 s, below the
/// gray timeout. The sets hold exactly the two sides' addresses, four rules drop the traffic
/// between them (and did drop packets), nothing crossed while they were in, both come out, and
/// every field of the report is filled.
#[test]
fn partition_is_cut_and_measured() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !can_run("partition_is_cut_and_measured") {
        return;
    }
    let minority: Vec<u32> = (0..6).collect();
    let run = cluster(
        &["--duration", "2", "--partition", "0,1,2,3,4,5@1000+4000"],
        "p0_rest",
    );
    let r = &run.report;
    // The rules as they were in: two sets with the sides' addresses, four drop rules.
    let side = set_elements(&run.seen, "p0_side");
    let rest = set_elements(&run.seen, "p0_rest");
    assert_eq!(
        side,
        minority.iter().map(|r| addr(*r)).collect(),
        "{}",
        run.seen
    );
    assert_eq!(rest, (6..NODES).map(addr).collect(), "{}", run.seen);
    assert_eq!(run.seen.matches(" drop").count(), 4, "{}", run.seen);
    let f = &r["net_faults"][0];
    assert_eq!(f["rules"], 4, "{f}");
    let (at, removed) = (
        f["at_ms"].as_u64().unwrap(),
        f["removed_ms"].as_u64().unwrap(),
    );
    assert!((1000..2000).contains(&at), "{f}");
    // Out no earlier than asked; the upper bound leaves room for a loaded machine (a shared
    // 2-core runner once held every process still for 8 s).
    assert!(removed >= at + 4000 && removed < at + 4000 + 10_000, "{f}");
    assert!(f["dropped_packets"].as_u64().unwrap() > 0, "{f}");
    shape(&run, &minority);
    // Healed after 4 s (past the 1 s silence rule): whether the minority was told is asked.
    let checks = &r["outages"][0]["checks"];
    assert!(
        checks["minority_told_and_exited_3"].is_boolean(),
        "{checks}"
    );
    // Nothing crossed: the report says so, and so do the node lines.
    let o = &r["outages"][0];
    assert_eq!(
        o["crossed"],
        serde_json::json!({"xcast": 0, "relm": 0}),
        "{o}"
    );
    let (cut, heal) = (
        o["cut_wall_ms"].as_f64().unwrap(),
        o["healed_wall_ms"].as_f64().unwrap(),
    );
    let side: BTreeSet<u32> = minority.iter().copied().collect();
    assert_eq!(crossings(&run, &side, cut, heal), (0, 0));
    // Ops did start on both sides during the cut (else "nothing crossed" would be empty).
    let started_during = |on_min: bool| {
        run.lines.iter().any(|(r, v)| {
            v["event"] == "xcast_started"
                && side.contains(r) == on_min
                && v["t_ms"].as_f64().is_some_and(|t| t > cut && t < heal)
        })
    };
    assert!(started_during(true) && started_during(false));
    // A side that did not continue shows it as a gap of most of the cut at some member.
    let (min, maj) = sides(r);
    for s in [min, maj] {
        if s["continued"] != true {
            assert!(s["gap_ms_max"].as_f64().unwrap() >= 3000.0, "{s}");
        }
    }
    assert_eq!(r["xcast_duplicated"], 0, "{r}");
    assert_eq!(r["relm_duplicates"], 0, "{r}");
}

/// Issue #23's "Done when": the majority {6..15} continues within 1 s of the cut (xcast and
/// RELM among its members), the minority decides nothing, no majority rank is removed, and
/// after the heal every minority rank is told and exits with status 3.
#[test]
fn majority_continues_and_minority_is_fenced() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !can_run("majority_continues_and_minority_is_fenced") {
        return;
    }
    let minority: Vec<u32> = (0..6).collect();
    let run = cluster(&["--partition", "0,1,2,3,4,5@1000+20000"], "p0_rest");
    shape(&run, &minority);
    let o = &run.report["outages"][0];
    assert_eq!(o["checks"]["majority_continued_within_1s"], true, "{o}");
    assert_eq!(o["checks"]["minority_decided_nothing"], true, "{o}");
    assert_eq!(o["checks"]["no_majority_rank_removed"], true, "{o}");
    assert_eq!(o["checks"]["minority_told_and_exited_3"], true, "{o}");
    assert_eq!(run.report["xcast_delivered_exactly_once"], true);
    assert_eq!(run.report["pass"], true, "{}", run.report);
}

/// The root alone, cut for good: the other 15 continue within 1 s. This holds on main
/// already (the 15 confirm the root failed, as after a crash, and the next rank takes over:
/// about 350 ms from the cut to the first op delivered everywhere, `docs/partitions.md`); the
/// root decides nothing on its own and, cut for good, is never told.
#[test]
fn the_root_alone_cut_for_good() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !can_run("the_root_alone_cut_for_good") {
        return;
    }
    let run = cluster(&["--partition", "0@1000+forever"], "p0_rest");
    shape(&run, &[0]);
    let o = &run.report["outages"][0];
    assert_eq!(o["checks"]["majority_continued_within_1s"], true, "{o}");
    assert_eq!(o["checks"]["no_majority_rank_removed"], true, "{o}");
    assert_eq!(o["checks"]["minority_decided_nothing"], true, "{o}");
    assert_eq!(
        o["checks"]["minority_told_and_exited_3"],
        Value::Null,
        "{o}"
    );
    assert_eq!(
        o["crossed"],
        serde_json::json!({"xcast": 0, "relm": 0}),
        "{o}"
    );
    // Never healed: no heal time, nothing after it.
    assert!(
        o["healed_ms"].is_null() && o["resume_after_heal_ms"].is_null(),
        "{o}"
    );
}

/// Bad `--partition` flags are refused before anything starts (no nftables needed).
#[test]
fn bad_partitions_are_refused() {
    let cases: [(&[&str], &str); 7] = [
        (
            &["--partition", "16@1000+100"],
            "rank 16 is not below --nodes 16",
        ),
        (&["--partition", "@1000+100"], "the set of ranks is empty"),
        (&["--partition", "1,1@1000+100"], "rank 1 named twice"),
        (&["--partition", "1-2@1000+100"], "expected A,B,C@MS+DUR"),
        (&["--partition", "1@1000"], "expected A,B,C@MS+DUR"),
        (
            &[
                "--partition",
                "0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15@1000+100",
            ],
            "every rank is on one side",
        ),
        (
            &["--partition", "1@1000+500", "--partition", "2@1400+forever"],
            "overlaps --partition 1@1000+500 in time",
        ),
    ];
    for (args, want) in cases {
        let out = Command::new(env!("CARGO_BIN_EXE_lifeline"))
            .args(["cluster", "--nodes", "16"])
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
    let out = Command::new(env!("CARGO_BIN_EXE_lifeline"))
        .args(["cluster", "--nodes", "4", "--partition", "1@1000+500"])
        .args(["--grow", "1@500"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot be combined"));
}
