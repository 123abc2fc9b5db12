"""A cluster member for the multi-process tests: started under torchrun-style variables
(RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) with ``bootstrap="env"``; events go to a callback
(on its own Python thread) that prints one JSON line each; stdin takes commands:
``xcast TEXT``, ``hold SECONDS`` (the next event's callback holds the GIL that long), ``view``,
``shrink R[,R...]`` (a shrink campaign: ``shrink_started`` with its id, or ``shrink_error``),
``quit``. Start-up events are lines too: ``checked_in``, ``startup_ready`` (the node's
``Ready``: ``ready`` is this worker's own line, once it started), ``startup_incomplete``; so are
the shrink events: ``departed``, ``left``, ``campaign_completed``, ``campaign_failed``.
``CONFIG`` (JSON, optional): core settings by key (``lifeline.start(config=...)``);
``DETECT_TIMEOUT`` (seconds, optional): the detector's timeout."""

from __future__ import annotations

import json
import os
import sys
import threading
import time

import lifeline

out_lock = threading.Lock()


def emit(**d: object) -> None:
    d.setdefault("t", time.time())
    with out_lock:
        sys.stdout.write(json.dumps(d) + "\n")
        sys.stdout.flush()


def protocol_tids() -> set:
    """Native ids of the node's runtime threads (named ``lifeline-rt``)."""
    tids = set()
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                if f.read().strip().startswith("lifeline-rt"):
                    tids.add(int(tid))
        except OSError:
            pass
    return tids


def main() -> None:
    node = lifeline.start(
        bootstrap="env",
        key=b"pytest cluster key",
        startup_grace=float(os.environ.get("GRACE", "0.5")),
        radix=2,
        bootstrap_timeout=30.0,
        detect_timeout=float(os.environ["DETECT_TIMEOUT"]) if "DETECT_TIMEOUT" in os.environ else None,
        config=json.loads(os.environ.get("CONFIG", "{}")),
    )
    hold = {"secs": 0.0}
    rt_tids = protocol_tids()

    def on_event(ev: lifeline.Event) -> None:
        me = threading.get_native_id()
        if me in rt_tids:
            emit(event="error", error="callback on a protocol thread")
        if hold["secs"] > 0:
            secs, hold["secs"] = hold["secs"], 0.0
            # Hold the GIL: no thread switch for `secs` (busy loop, switch interval raised).
            old = sys.getswitchinterval()
            sys.setswitchinterval(secs + 5)
            t0 = time.monotonic()
            while time.monotonic() - t0 < secs:
                pass
            sys.setswitchinterval(old)
            emit(event="held", secs=time.monotonic() - t0)
        if isinstance(ev, lifeline.ViewChanged):
            emit(event="view_changed", removed=list(ev.removed), causes=ev.causes,
                 members=list(ev.members), epoch=ev.epoch)
        elif isinstance(ev, lifeline.XcastDelivered):
            emit(event="xcast", origin=ev.origin, seq=ev.seq, payload=ev.payload.decode())
        elif isinstance(ev, lifeline.LinkUp):
            emit(event="link_up", peer=ev.peer)
        elif isinstance(ev, lifeline.Evicted):
            emit(event="evicted")
        elif isinstance(ev, lifeline.CheckedIn):
            emit(event="checked_in", epoch=ev.epoch, ranks=list(ev.ranks), members=ev.members)
        elif isinstance(ev, lifeline.Ready):
            emit(event="startup_ready", epoch=ev.epoch, members=ev.members)
        elif isinstance(ev, lifeline.StartupIncomplete):
            emit(event="startup_incomplete", epoch=ev.epoch, missing=list(ev.missing),
                 members=ev.members)
        elif isinstance(ev, lifeline.Departed):
            emit(event="departed", epoch=ev.epoch, ranks=list(ev.ranks),
                 campaigns=list(ev.campaigns), members=list(ev.members))
        elif isinstance(ev, lifeline.Left):
            emit(event="left", epoch=ev.epoch)
        elif isinstance(ev, lifeline.CampaignCompleted):
            emit(event="campaign_completed", id=ev.id, removed=list(ev.removed), epoch=ev.epoch)
        elif isinstance(ev, lifeline.CampaignFailed):
            emit(event="campaign_failed", id=ev.id, reason=ev.reason)

    node.on_event(on_event)
    emit(event="ready", rank=node.rank, pid=os.getpid(), launcher=node.launcher,
         rt_threads=len(rt_tids))
    for line in sys.stdin:
        cmd, _, arg = line.strip().partition(" ")
        if cmd == "xcast":
            seq = node.xcast(16, arg.encode(), timeout=5.0)
            emit(event="xcast_started", seq=seq)
        elif cmd == "hold":
            hold["secs"] = float(arg)
            node.xcast(17, b"hold", timeout=5.0)
        elif cmd == "view":
            v = node.view()
            emit(event="view", epoch=v.epoch, members=list(v.members))
        elif cmd == "shrink":
            try:
                cid = node.shrink(int(r) for r in arg.split(","))
                emit(event="shrink_started", id=cid)
            except Exception as e:  # the test asserts on the error's type
                emit(event="shrink_error", error=type(e).__name__, text=str(e))
        elif cmd == "quit":
            break
    node.close()
    emit(event="closed")


if __name__ == "__main__":
    main()
