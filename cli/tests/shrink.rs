//! Shrink campaigns with real processes: `lifeline node` reads `shrink R[,R...]` on stdin.

use serde_json::Value;

mod common;
#[path = "common/procs.rs"]
mod procs;

use procs::{wait_for, Nodes};

/// Five members (radix 2: 0 → 1,2; 1 → 3; 2 → 4... as the layout puts them). Rank 2 asks to
/// shrink ranks 3 and 4: it prints `campaign_started` then one `campaign_completed` naming
/// both; every survivor prints one `departed` with both and no `failure_confirmed`; each
/// target prints `left` and exits 0; a broadcast afterwards reaches the survivors. A bad
/// request is answered `error`.
#[test]
fn node_shrinks_two_ranks_and_they_exit_cleanly() {
    let mut c = Nodes::start("shrink", 5);
    c.stdin(2, "shrink 2");
    let e = wait_for(&mut c.outs[2], "error");
    assert!(e["message"].as_str().unwrap().contains("itself"), "{e}");
    c.stdin(2, "shrink 3,4");
    let started = wait_for(&mut c.outs[2], "campaign_started");
    assert_eq!(started["targets"], serde_json::json!([3, 4]), "{started}");
    // The requester applies the departure view, then reports the completion.
    let departed = wait_for(&mut c.outs[2], "departed");
    assert_eq!(departed["ranks"], serde_json::json!([3, 4]), "{departed}");
    let done = wait_for(&mut c.outs[2], "campaign_completed");
    assert_eq!(done["id"], started["id"], "{done}");
    assert_eq!(done["removed"], serde_json::json!([3, 4]), "{done}");
    for t in [3, 4] {
        let left = wait_for(&mut c.outs[t], "left");
        assert!(left["epoch"].as_u64().is_some(), "{left}");
        let status = c.nodes[t].0.wait().unwrap();
        assert_eq!(status.code(), Some(0), "target {t}");
    }
    for r in [0, 1] {
        // The departure view, before anything else names the targets.
        let mut seen = Vec::new();
        for l in c.outs[r].by_ref() {
            let v: Value = serde_json::from_str(&l.unwrap()).unwrap();
            assert_ne!(v["event"], "failure_confirmed", "rank {r}: {v}");
            if v["event"] == "departed" {
                seen.push(v);
                break;
            }
        }
        assert_eq!(seen[0]["ranks"], serde_json::json!([3, 4]), "rank {r}");
        assert_eq!(seen[0]["members"], 3, "rank {r}");
    }
    c.stdin(1, "xcast 16 after the shrink");
    for r in [0, 2] {
        let v = wait_for(&mut c.outs[r], "xcast_delivered");
        assert_eq!(v["payload"], "after the shrink", "rank {r}");
    }
}
