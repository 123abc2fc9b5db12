"""``lifeline.start`` in one process: the three ways to read events, commands and their
errors, back-pressure, close; fork safety and Ctrl-C in child processes."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from typing import List

import pytest

import lifeline
from conftest import free_ports

KEY = b"pytest key"


def start_cluster(n: int, **kw) -> List[lifeline.RunningNode]:
    peers = [f"127.0.0.1:{p}" for p in free_ports(n)]
    kw.setdefault("startup_grace", 0.3)
    return [lifeline.start(r, peers, key=KEY, radix=2, **kw) for r in range(n)]


@pytest.fixture
def three():
    nodes = start_cluster(3)
    yield nodes
    for n in nodes:
        n.close()


def wait_for(node: lifeline.RunningNode, cls: type, timeout: float = 10.0):
    for ev in node.events(timeout=timeout):
        if isinstance(ev, cls):
            return ev
    raise AssertionError(f"rank {node.rank}: no {cls.__name__} within {timeout} s")


def test_iterator_delivers_typed_events(three):
    seq = three[0].xcast(16, b"one")
    for n in three:
        ev = wait_for(n, lifeline.XcastDelivered)
        assert (ev.origin, ev.seq, ev.tag, ev.payload) == (0, seq, 16, b"one")
        assert isinstance(ev.payload, bytes)
    uid = three[2].relm_send(1, 7, memoryview(b"two"))
    ev = wait_for(three[1], lifeline.RelmDelivered)
    assert (ev.src, ev.uid, ev.tag, ev.payload) == (2, uid, 7, b"two")
    assert wait_for(three[2], lifeline.RelmAcked).dst == 1
    # A timeout ends the iteration; next_event raises TimeoutError.
    t0 = time.monotonic()
    assert [e for e in three[0].events(timeout=0.2) if isinstance(e, lifeline.XcastDelivered)] == []
    assert time.monotonic() - t0 < 2.0
    with pytest.raises(TimeoutError):
        while True:
            three[0].next_event(timeout=0.2)


def test_asyncio_async_for_and_cancellation_lose_nothing(three):
    async def main():
        got = []

        async def reader():
            async for ev in three[1]:
                if isinstance(ev, lifeline.XcastDelivered):
                    got.append(ev.payload)
                    if len(got) == 3:
                        return

        # Read what is there (link changes), until nothing comes for 0.3 s.
        with pytest.raises(TimeoutError):
            while True:
                await three[1].next_event_async(timeout=0.3)
        # Cancelled waits (their executor threads still waiting) keep what they find.
        for _ in range(3):
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(three[1].next_event_async(), timeout=0.02)
        task = asyncio.ensure_future(reader())
        for i in range(3):
            three[0].xcast(16, f"m{i}".encode(), timeout=5)
        await asyncio.wait_for(task, timeout=10)
        with pytest.raises(TimeoutError):
            while True:
                await three[1].next_event_async(timeout=0.2)
        return got

    assert asyncio.run(main()) == [b"m0", b"m1", b"m2"]


def test_callbacks_run_on_a_python_thread_never_a_protocol_thread(three):
    got = []
    threads = set()
    done = threading.Event()

    def cb(ev):
        threads.add((threading.current_thread().name, threading.get_native_id()))
        if isinstance(ev, lifeline.XcastDelivered):
            got.append(ev.payload)
            done.set()
        if isinstance(ev, lifeline.LinkUp):
            raise RuntimeError("a callback error is logged, delivery goes on")

    t = three[2].on_event(cb)
    assert t.name == "lifeline-callbacks-2"
    with pytest.raises(RuntimeError, match="already go to a callback"):
        three[2].next_event(timeout=0.1)
    three[0].xcast(16, b"cb")
    assert done.wait(10)
    assert got == [b"cb"]
    rt = set()
    for tid in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{tid}/comm") as f:
            if f.read().startswith("lifeline-rt"):
                rt.add(int(tid))
    assert rt, "the runtime's threads are named lifeline-rt"
    assert {name for name, _ in threads} == {"lifeline-callbacks-2"}
    assert not {tid for _, tid in threads} & rt
    three[2].close()
    t.join(5)
    assert not t.is_alive()


START_UP = (lifeline.CheckedIn, lifeline.Ready, lifeline.StartupIncomplete)


def test_start_checks_in_by_default_and_check_in_false_turns_it_off():
    nodes = start_cluster(3)
    try:
        epochs = set()
        for n in nodes:
            ev = wait_for(n, lifeline.Ready)
            assert ev.members == 3, ev
            epochs.add(ev.epoch)
            assert n.view().epoch == ev.epoch and n.view().members == (0, 1, 2)
            s = n.stats()
            assert s["core.startup_check_ins_out"] >= 1
            assert s["core.membership_refusals_out"] == 0
        assert len(epochs) == 1 and epochs.pop() >= 1
        assert nodes[0].stats()["core.startup_check_ins_in"] >= 2
    finally:
        for n in nodes:
            n.close()
    nodes = start_cluster(2, check_in=False)
    try:
        nodes[0].xcast(16, b"no start-up")
        for n in nodes:
            evs = list(n.events(timeout=0.5))
            assert any(isinstance(e, lifeline.XcastDelivered) for e in evs), evs
            assert not [e for e in evs if isinstance(e, START_UP)], evs
            assert n.view().epoch == 0
            assert n.stats()["core.startup_check_ins_out"] == 0
    finally:
        for n in nodes:
            n.close()


def test_a_rank_that_never_starts_is_named_after_startup_timeout():
    peers = [f"127.0.0.1:{p}" for p in free_ports(2)]
    t0 = time.monotonic()
    with lifeline.start(0, peers, key=KEY, radix=2, startup_grace=0.3, startup_timeout=0.6) as n:
        seen = []
        for e in n.events(timeout=10):
            seen.append(e)
            if isinstance(e, lifeline.StartupIncomplete):
                break
        ev = seen[-1]
        assert isinstance(ev, lifeline.StartupIncomplete), seen
        assert ev.missing == (1,) and ev.members == 1, ev
        assert n.view().members == (0,) and n.view().epoch == ev.epoch
        # Removed, cause never_joined (not a failure), whatever noticed it first.
        (v,) = [e for e in seen if isinstance(e, lifeline.ViewChanged)]
        assert v.causes == {1: "never_joined"} and v.members == (0,), v
        assert not [e for e in seen if isinstance(e, lifeline.Ready)]
        assert time.monotonic() - t0 >= 0.3


def test_unread_events_back_pressure_and_nothing_is_dropped():
    nodes = start_cluster(2, output_buffer=8)
    try:
        a, b = nodes
        sent = 0
        # b reads nothing: its outputs fill, it stops reading data, a's queues or window fill.
        with pytest.raises(lifeline.Backpressure):
            for i in range(100_000):
                a.relm_send(1, 1, i.to_bytes(4, "little") * 256)
                sent += 1
        assert sent > 0
        got = []
        for ev in b.events(timeout=2.0):
            if isinstance(ev, lifeline.RelmDelivered):
                got.append(int.from_bytes(ev.payload[:4], "little"))
        assert got == list(range(sent)), "every message, once, in order"
        assert a.view().members == (0, 1) and b.view().members == (0, 1)
    finally:
        for n in nodes:
            n.close()


def test_errors_close_and_context_manager():
    (port,) = free_ports(1)
    with pytest.raises(ValueError, match="no cluster key"):
        os.environ.pop("LIFELINE_CLUSTER_KEY", None)
        lifeline.start(0, [f"127.0.0.1:{port}"])
    with pytest.raises(ValueError, match="not in peers"):
        lifeline.start(1, [f"127.0.0.1:{port}"], key=KEY)
    with pytest.raises(ValueError, match="unknown config key"):
        lifeline.start(0, [f"127.0.0.1:{port}"], key=KEY, config={"bogus": 1})
    with pytest.raises(ValueError, match="bootstrap"):
        lifeline.start(bootstrap="file", key=KEY)
    with pytest.raises(ValueError, match="startup_timeout"):
        lifeline.start(0, [f"127.0.0.1:{port}"], key=KEY, startup_timeout=-1.0)
    with pytest.raises(ValueError, match="quic"):
        lifeline.start(0, [f"127.0.0.1:{port}"], transport="quic")
    with pytest.raises(TypeError):
        lifeline.start(0, "127.0.0.1:1", key=KEY)
    with lifeline.start(0, [f"127.0.0.1:{port}"], key=KEY) as n:
        with pytest.raises(ValueError, match="reserved"):
            n.xcast(5, b"")
        with pytest.raises(ValueError, match="max_frame"):
            n.xcast(16, bytes(2 << 20))
        with pytest.raises(lifeline.NotAMember):
            n.relm_send(3, 0, b"")
        n.xcast(16, b"alone")
        assert isinstance(wait_for(n, lifeline.XcastDelivered), lifeline.XcastDelivered)
        with pytest.raises(lifeline.StartError):
            lifeline.start(0, [f"127.0.0.1:{port}"], key=KEY)  # the port is taken
    assert n.closed
    with pytest.raises(lifeline.Closed):
        n.xcast(16, b"")
    assert list(n.events(timeout=1)) == []
    n.close()


def run_child(code: str, timeout: float = 30.0, **popen) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        **popen,
    )


def test_a_forked_child_raises_at_once_and_never_deadlocks():
    port = free_ports(1)[0]
    r = run_child(
        f"""
        import os, sys, time, threading
        import lifeline
        n = lifeline.start(0, ["127.0.0.1:{port}"], key=b"k")
        # A reader blocked in the node while the fork happens (it holds the node's lock).
        threading.Thread(target=lambda: list(n.events(timeout=3)), daemon=True).start()
        time.sleep(0.2)
        pid = os.fork()
        if pid == 0:
            t0 = time.monotonic()
            errs = []
            for call in (lambda: n.xcast(16, b"x"), lambda: n.next_event(timeout=1),
                         lambda: n.view(), lambda: n.close()):
                try:
                    call()
                except lifeline.ForkError as e:
                    errs.append(str(e))
            ok = len(errs) == 4 and time.monotonic() - t0 < 1.0
            print("child", len(errs), round(time.monotonic() - t0, 3), flush=True)
            # A normal exit: atexit and finalizers run in the child, and must not hang.
            sys.exit(0 if ok else 1)
        _, status = os.waitpid(pid, 0)
        print("child status", os.waitstatus_to_exitcode(status), flush=True)
        n.xcast(16, b"parent still works")
        n.close()
        print("parent ok", flush=True)
        """
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "child 4" in r.stdout and "child status 0" in r.stdout, r.stdout + r.stderr
    assert "parent ok" in r.stdout


def test_ctrl_c_interrupts_a_blocking_events_loop():
    port = free_ports(1)[0]
    p = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                f"""
                import time, lifeline
                n = lifeline.start(0, ["127.0.0.1:{port}"], key=b"k")
                print("ready", flush=True)
                try:
                    for ev in n.events():
                        pass
                except KeyboardInterrupt:
                    print("interrupted", time.time(), flush=True)
                n.close()
                print("closed", flush=True)
                """
            ),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert p.stdout is not None
        assert p.stdout.readline().strip() == "ready"
        time.sleep(0.3)
        t0 = time.time()
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=10)
    finally:
        p.kill()
    lines = out.split("\n")
    assert lines[0].startswith("interrupted"), out + err
    latency_ms = (float(lines[0].split()[1]) - t0) * 1e3
    print(f"SIGINT to KeyboardInterrupt: {latency_ms:.1f} ms")
    assert latency_ms < 500
    assert "closed" in out and p.returncode == 0


def test_interpreter_exit_closes_open_nodes():
    """Nodes left open are closed by the atexit hook: the interpreter exits promptly, cleanly."""
    ports = free_ports(2)
    peers = [f"127.0.0.1:{p}" for p in ports]
    t0 = time.monotonic()
    r = run_child(
        f"""
        import lifeline
        a = lifeline.start(0, {peers!r}, key=b"k")
        b = lifeline.start(1, {peers!r}, key=b"k")
        a.xcast(16, b"x")
        print("exiting without close", flush=True)
        """,
        timeout=20,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert time.monotonic() - t0 < 15
