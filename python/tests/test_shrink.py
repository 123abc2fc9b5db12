"""Shrink campaigns between Python processes on loopback (``RunningNode.shrink``, workers of
``worker.py`` started as under torchrun, radix 2): a campaign that completes (one
``CampaignCompleted`` at the requester naming exactly the targets, one ``Departed`` at every
survivor at one epoch, ``Left`` at each target)."""

from __future__ import annotations

import time
from typing import Dict, List, Optional

import pytest

from conftest import HERE, Proc, free_ports


def cluster(n: int, env: Optional[Dict[str, str]] = None) -> List[Proc]:
    """``n`` workers, every one started and past its ``Ready`` (one each, all ``n`` members, at
    one epoch)."""
    (port,) = free_ports(1)
    procs = [
        Proc(
            [str(HERE / "worker.py")],
            env={
                "RANK": str(r),
                "WORLD_SIZE": str(n),
                "LOCAL_RANK": str(r),
                "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": str(port),
                "GRACE": "0.5",
                **(env or {}),
            },
        )
        for r in range(n)
    ]
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
