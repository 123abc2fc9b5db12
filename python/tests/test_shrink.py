"""Shrink campaigns between Python processes on loopback (``RunningNode.shrink``, workers of
``worker.py`` started as under torchrun, radix 2): a campaign that completes (one
``CampaignCompleted`` at the requester naming exactly the targets, one ``Departed`` at every
survivor at one epoch, ``Left`` at each target), and one that cannot complete within its bound
(``CampaignFailed``, reason ``timed_out``)."""

from __future__ import annotations

import json
import os
import signal
import time
from typing import Dict, List, Optional

import pytest

from conftest import Proc, torchrun_workers


def cluster(n: int, env: Optional[Dict[str, str]] = None) -> List[Proc]:
    """``n`` workers, every one started and past its ``Ready`` (one each, all ``n`` members, at
    one epoch)."""
    procs = torchrun_workers(n, env)
    try:
        for p in procs:
            p.expect("ready")
        epochs = set()
        for p in procs:
            seen = [d for d in p.seen if d.get("event") == "startup_ready"]
            r = seen[0] if seen else p.expect("startup_ready", timeout=20)
            assert r["members"] == n, r
            epochs.add(r["epoch"])
        assert len(epochs) == 1, epochs
    except BaseException:
        for p in procs:
            p.stop()
        raise
    return procs


def events(p: Proc, kind: str) -> List[dict]:
    return [d for d in p.seen if d.get("event") == kind]


def first(p: Proc, kind: str, timeout: float = 20.0) -> dict:
    """The first ``kind`` line: one already read (while waiting for another), or the next."""
    got = events(p, kind)
    return got[0] if got else p.expect(kind, timeout=timeout)


def shrink(p: Proc, targets: List[int]) -> int:
    p.send("shrink " + ",".join(str(t) for t in targets))
    return p.expect("shrink_started", timeout=10)["id"]


# Six ranks, radix 2. Targets in two branches, the requester a leaf (not the coordinator).
N = 6
REQUESTER = 4
TARGETS = [3, 5]
SURVIVORS = [0, 1, 2, 4]


@pytest.fixture
def six():
    ps = cluster(N)
    yield ps
    for p in ps:
        p.stop()


def test_a_shrink_of_two_ranks_completes_once_every_survivor_departs_them_once_targets_leave(six):
    # Past the start-up grace (a departure must not look like a late starter).
    time.sleep(0.7)
    req = six[REQUESTER]
    t0 = time.monotonic()
    cid = shrink(req, TARGETS)
    # The id is requester << 32 | seq: this rank's first campaign.
    assert cid == (REQUESTER << 32) | 1, hex(cid)
    done = req.expect("campaign_completed", timeout=20)
    elapsed_ms = (time.monotonic() - t0) * 1e3
    assert done["id"] == cid and done["removed"] == TARGETS, done
    epoch = done["epoch"]
    for r in SURVIVORS:
        d = first(six[r], "departed")
        assert d["ranks"] == TARGETS, (r, d)
        assert d["campaigns"] == [cid], (r, d)
        assert d["members"] == SURVIVORS, (r, d)
        assert d["epoch"] == epoch, (r, d, epoch)
    for r in TARGETS:
        first(six[r], "left")
        six[r].send("quit")
        six[r].expect("closed", timeout=10)
        assert six[r].p.wait(timeout=10) == 0, "".join(six[r].stderr)
    # The survivors go on: an xcast reaches each exactly once.
    six[0].send("xcast after-the-shrink")
    for r in SURVIVORS:
        six[r].expect("xcast", payload="after-the-shrink")
    time.sleep(0.5)
    for r in SURVIVORS:
        p = six[r]
        p.drain(0.3)
        got = [d for d in events(p, "xcast") if d["payload"] == "after-the-shrink"]
        assert len(got) == 1, (r, got)
        # Exactly one departure, and no failure path: no view change, eviction or left.
        assert len(events(p, "departed")) == 1, (r, events(p, "departed"))
        for kind in ("view_changed", "evicted", "left", "campaign_failed", "error"):
            assert not events(p, kind), (r, kind, events(p, kind))
        p.send("view")
        v = p.expect("view")
        assert v["members"] == SURVIVORS and v["epoch"] >= epoch, (r, v)
    # Exactly one completion, at the requester only.
    assert len(events(req, "campaign_completed")) == 1, events(req, "campaign_completed")
    for r in SURVIVORS:
        if r != REQUESTER:
            assert not events(six[r], "campaign_completed"), r
    print(f"shrink {TARGETS} from rank {REQUESTER}: completed in {elapsed_ms:.1f} ms, epoch {epoch}")


# Four ranks, radix 2. The coordinator (0) stops answering while it holds the
# request (SIGSTOP, its order not yet sequenced) for longer than the campaign's bound; the
# detector is slow (10 s) so nobody replaces it in time: the requester's campaign fails,
# `timed_out`, exactly once, and never completes here, even when the coordinator wakes up and
# carries the order out (its target still leaves, departed at every survivor).
BOUND_S = 1.5
BATCH_S = 0.6
FAIL_ENV = {
    "DETECT_TIMEOUT": "10.0",
    "CONFIG": json.dumps(
        {
            "membership_shrink_timeout_ns": int(BOUND_S * 1e9),
            "membership_shrink_batch_ns": int(BATCH_S * 1e9),
        }
    ),
}


def test_a_campaign_whose_coordinator_stops_answering_fails_timed_out_once():
    procs = cluster(4, FAIL_ENV)
    coord = procs[0]
    try:
        time.sleep(0.7)
        req = procs[2]
        t0 = time.monotonic()
        cid = shrink(req, [3])
        # The request reached the coordinator (one hop on loopback); stop it before its batch
        # window (BATCH_S) sequences the order.
        time.sleep(0.2)
        os.kill(coord.p.pid, signal.SIGSTOP)
        try:
            failed = req.expect("campaign_failed", timeout=BOUND_S + 10)
            waited = time.monotonic() - t0
            assert failed["id"] == cid and failed["reason"] == "timed_out", failed
            assert waited >= BOUND_S - 0.05, waited
            # Nothing completed meanwhile: the target is still a member, leaving or not.
            assert not events(procs[3], "left")
        finally:
            os.kill(coord.p.pid, signal.SIGCONT)
        # Awake, the coordinator sequences the order it held: the target leaves and every
        # survivor departs it once; the requester's campaign stays failed (no completion).
        first(procs[3], "left", timeout=15)
        for r in (0, 1, 2):
            d = first(procs[r], "departed", timeout=15)
            assert d["ranks"] == [3] and d["campaigns"] == [cid], (r, d)
        req.drain(1.0)
        assert len(events(req, "campaign_failed")) == 1, events(req, "campaign_failed")
        assert not events(req, "campaign_completed"), events(req, "campaign_completed")
        for r in (0, 1, 2):
            assert not events(procs[r], "view_changed"), (r, events(procs[r], "view_changed"))
        print(f"campaign failed timed_out after {waited:.2f} s (bound {BOUND_S} s)")
    finally:
        for p in procs:
            p.stop()
