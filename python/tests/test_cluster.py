"""Four Python processes on loopback with ``lifeline.start`` (``bootstrap="env"``, as under
torchrun, check-ins on by default): one ``Ready`` each at one epoch, a ``kill -9``, a callback
holding the GIL."""

from __future__ import annotations

import os
import signal
import time
from typing import List

import pytest

from conftest import Proc, torchrun_workers

N = 4


def cluster(n: int = N) -> List[Proc]:
    procs = torchrun_workers(n)
    for p in procs:
        ready = p.expect("ready")
        assert ready["launcher"] == "torchrun"
        assert ready["rt_threads"] >= 1
    return procs


def ready_epoch(procs: List[Proc]) -> int:
    """Every process gets exactly one ``Ready``, at the same epoch, with all ``N`` members (and
    no ``StartupIncomplete``); that epoch."""
    epochs = set()
    for p in procs:
        # It may have come before the worker's own ``ready`` line (read while waiting for it).
        seen = [d for d in p.seen if d.get("event") == "startup_ready"]
        r = seen[0] if seen else p.expect("startup_ready", timeout=20)
        assert r["members"] == N, r
        epochs.add(r["epoch"])
    for p in procs:
        p.drain(0.2)
        got = [d for d in p.seen if d.get("event") == "startup_ready"]
        assert len(got) == 1, got
        assert not [d for d in p.seen if d.get("event") == "startup_incomplete"]
        ranks = sorted(x for d in p.seen if d.get("event") == "checked_in" for x in d["ranks"])
        assert ranks == list(range(N)), p.seen
    assert len(epochs) == 1, epochs
    (epoch,) = epochs
    assert epoch >= 1
    return epoch


@pytest.fixture
def procs():
    ps = cluster()
    yield ps
    for p in ps:
        p.stop()


def test_kill_9_is_a_view_change_within_100_ms_then_xcast_reaches_all_survivors_once(procs):
    epoch = ready_epoch(procs)
    # Past the start-up grace: a refused re-dial is then hard evidence.
    time.sleep(1.0)
    victim = procs[3]
    t_kill = time.time()
    os.kill(victim.p.pid, signal.SIGKILL)
    survivors = procs[:3]
    lat = []
    for p in survivors:
        v = p.expect("view_changed")
        assert v["removed"] == [3], v
        assert v["epoch"] > epoch, v
        assert v["members"] == [0, 1, 2], v
        lat.append((v["t"] - t_kill) * 1e3)
    print(f"ViewChanged after kill -9, ms per survivor: {[round(x, 1) for x in lat]}")
    assert max(lat) < 100.0, lat
    survivors[0].send("xcast after-the-kill")
    for p in survivors:
        p.expect("xcast", payload="after-the-kill")
    # Exactly once: no second delivery shows up.
    time.sleep(0.5)
    for p in survivors:
        more = [d for d in p.drain(0.3) if d.get("event") == "xcast"]
        got = [d for d in p.seen if d.get("event") == "xcast" and d["payload"] == "after-the-kill"]
        assert len(got) == 1 and not more, (got, more)
        p.send("view")
        assert p.expect("view")["members"] == [0, 1, 2]
    for p in survivors:
        assert not [d for d in p.seen if d.get("event") == "error"]


def test_a_callback_holding_the_gil_for_2_s_removes_nobody(procs):
    epoch = ready_epoch(procs)
    time.sleep(0.7)
    procs[1].send("hold 2.0")
    held = procs[1].expect("held", timeout=10)
    assert held["secs"] >= 2.0
    # Everyone keeps exchanging traffic, and nobody was removed.
    procs[0].send("xcast after-the-hold")
    for p in procs:
        p.expect("xcast", payload="after-the-hold")
    time.sleep(0.5)
    for p in procs:
        p.send("view")
        v = p.expect("view")
        # No view change since start-up completed.
        assert v["members"] == [0, 1, 2, 3] and v["epoch"] == epoch, v
        p.drain(0.1)
        assert not [d for d in p.seen if d.get("event") in ("view_changed", "evicted", "error")]
