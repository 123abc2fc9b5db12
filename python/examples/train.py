"""Data-parallel training that survives ``kill -9`` of a rank, on Lifeline.

Every rank trains the same linear model on its own shard; each step it broadcasts its gradient
(``xcast``: delivered once, in the same order, at every member) and averages the gradients of
the step's contributors. A rank that dies is removed by a ``ViewChanged`` event that every
survivor sees at the same point of that order, so every survivor closes each step with the same
contributors, keeps identical parameters, and goes on with the agreed member set.

Run it by hand (a launcher that starts N ranks on this machine and kills one mid-run):

    python examples/train.py --launch 8 --kill 3

or under torchrun (or anything that sets RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT):

    LIFELINE_CLUSTER_KEY=secret torchrun --nproc-per-node 8 examples/train.py

numpy is used when installed, plain Python (the ``array`` module) otherwise (or with
``LIFELINE_EXAMPLE_NO_NUMPY=1``).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import re
import signal
import struct
import subprocess
import sys
import threading
import time
from array import array
from typing import Dict, List, Optional, Tuple

try:
    if os.environ.get("LIFELINE_EXAMPLE_NO_NUMPY"):
        raise ImportError("plain Python asked for")
    import numpy as np
except ImportError:
    np = None  # type: ignore[assignment]

import lifeline

TAG_GRAD = 16
DIM = 16
SHARD = 256
HEADER = struct.Struct("<Id")  # step, local loss


# -- the model: least squares, y = X @ w_true + noise -------------------------------------------

class Model:
    """Parameters, one shard, and the gradient of the mean squared error on it."""

    def __init__(self, rank: int) -> None:
        rng = random.Random(1234)
        self.w_true = [rng.uniform(-1, 1) for _ in range(DIM)]
        rng = random.Random(rank)
        self.x = [[rng.gauss(0, 1) for _ in range(DIM)] for _ in range(SHARD)]
        self.y = [sum(a * b for a, b in zip(row, self.w_true)) + rng.gauss(0, 0.01) for row in self.x]
        if np is not None:
            self.xn = np.array(self.x)
            self.yn = np.array(self.y)
            self.w = np.zeros(DIM)
        else:
            self.w = array("d", [0.0] * DIM)

    def grad(self) -> Tuple[bytes, float]:
        """The local gradient (float64 bytes) and the local loss."""
        if np is not None:
            err = self.xn @ self.w - self.yn
            return (2.0 / SHARD * (self.xn.T @ err)).tobytes(), float(np.mean(err**2))
        err = [sum(a * b for a, b in zip(row, self.w)) - y for row, y in zip(self.x, self.y)]
        g = array("d", [0.0] * DIM)
        for row, e in zip(self.x, err):
            for j in range(DIM):
                g[j] += 2.0 / SHARD * e * row[j]
        return g.tobytes(), sum(e * e for e in err) / SHARD

    def apply(self, grads: List[bytes], lr: float) -> None:
        """Averages ``grads`` (in the given order: the same at every rank) and steps."""
        if np is not None:
            g = sum(np.frombuffer(b) for b in grads) / len(grads)
            self.w = self.w - lr * g
            return
        gs = [array("d", b) for b in grads]
        for j in range(DIM):
            self.w[j] -= lr * sum(g[j] for g in gs) / len(gs)

    def digest(self) -> str:
        b = self.w.tobytes()
        return hashlib.sha256(b).hexdigest()[:16]


# -- one rank ---------------------------------------------------------------------------------

def worker(args: argparse.Namespace) -> int:
    node = lifeline.start(
        bootstrap="env",
        key=os.environ.get("LIFELINE_CLUSTER_KEY", "train.py example key"),
        startup_grace=args.grace,
        bootstrap_timeout=60.0,
    )
    me = node.rank
    say = lambda msg: print(f"[rank {me}] {msg}", flush=True)  # noqa: E731
    model = Model(me)
    members = set(range(node.span))
    pending: Dict[int, Dict[int, Tuple[bytes, float]]] = {}
    duplicates = 0
    say(f"started: {node.span} ranks ({node.launcher}), numpy={'yes' if np is not None else 'no'}")
    for step in range(args.steps):
        g, loss = model.grad()
        node.xcast(TAG_GRAD, HEADER.pack(step, loss) + g, timeout=30.0)
        # The step closes once every current member's gradient for it is delivered.
        while not members <= set(pending.get(step, {})):
            ev = node.next_event(timeout=30.0)
            if isinstance(ev, lifeline.XcastDelivered) and ev.tag == TAG_GRAD:
                s, l = HEADER.unpack_from(ev.payload)
                got = pending.setdefault(s, {})
                duplicates += ev.origin in got
                got[ev.origin] = (ev.payload[HEADER.size:], l)
            elif isinstance(ev, lifeline.ViewChanged):
                members = set(ev.members)
                causes = ", ".join(f"rank {r}: {c}" for r, c in ev.causes.items())
                say(f"view {ev.epoch}: removed {list(ev.removed)} ({causes}); "
                    f"training goes on with {len(members)} members {sorted(members)}")
            elif isinstance(ev, lifeline.Evicted):
                say("evicted from the cluster: stopping")
                return 3
        got = pending.pop(step)
        contributors = sorted(r for r in got if r in members)
        model.apply([got[r][0] for r in contributors], args.lr)
        if step % args.every == 0 or step == args.steps - 1:
            mean_loss = sum(got[r][1] for r in contributors) / len(contributors)
            say(f"step {step} loss {mean_loss:.6f} contributors {len(contributors)}")
        time.sleep(args.step_time)
    view = node.view()
    say(f"done: {args.steps} steps members={list(view.members)} epoch={view.epoch} "
        f"params={model.digest()} duplicates={duplicates}")
    # Let the others finish their last step before this rank's links go down.
    time.sleep(args.linger)
    node.close()
    return 0


# -- a launcher for trying it by hand ---------------------------------------------------------

DONE = re.compile(r"\[rank (\d+)\] done: (\d+) steps members=(\[[^\]]*\]) epoch=(\d+) "
                  r"params=(\w+) duplicates=(\d+)")
STEP = re.compile(r"\[rank (\d+)\] step (\d+) ")


def launch(args: argparse.Namespace) -> int:
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    here = os.path.abspath(__file__)
    passthrough = [f"--steps={args.steps}", f"--every={args.every}",
                   f"--step-time={args.step_time}", f"--grace={args.grace}", f"--lr={args.lr}"]
    procs = []
    for r in range(args.launch):
        env = dict(os.environ, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(args.launch),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        procs.append(subprocess.Popen([sys.executable, here, *passthrough], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True, bufsize=1))
    done: Dict[int, Tuple[str, str, int]] = {}
    killed: Optional[int] = None
    lock = threading.Lock()

    def pump(p: subprocess.Popen) -> None:
        nonlocal killed
        assert p.stdout is not None
        for line in p.stdout:
            sys.stdout.write(line)
            m = DONE.search(line)
            if m:
                with lock:
                    done[int(m[1])] = (m[3], m[5], int(m[6]))
            m = STEP.search(line)
            if m and args.kill is not None and int(m[2]) >= args.kill_at:
                with lock:
                    if killed is None:
                        killed = args.kill
                        os.kill(procs[args.kill].pid, signal.SIGKILL)
                        print(f"launcher: kill -9 rank {args.kill} (pid {procs[args.kill].pid}) "
                              f"at step {m[2]}", flush=True)

    threads = [threading.Thread(target=pump, args=(p,), daemon=True) for p in procs]
    for t in threads:
        t.start()
    codes = [p.wait() for p in procs]
    for t in threads:
        t.join(5)
    survivors = [r for r in range(args.launch) if r != killed]
    ok = all(codes[r] == 0 for r in survivors) and sorted(done) == survivors
    views = {done[r][0] for r in survivors if r in done}
    params = {done[r][1] for r in survivors if r in done}
    dups = sum(done[r][2] for r in survivors if r in done)
    agree = ok and views == {str(survivors)} and len(params) == 1 and dups == 0
    if args.kill is not None and killed is None:
        agree = False
        print(f"launcher: rank {args.kill} was never killed (no rank reached step {args.kill_at})")
    if agree:
        print(f"launcher: OK: {len(survivors)} ranks finished {args.steps} steps"
              + (f" after rank {killed} was killed with kill -9" if killed is not None else "")
              + f"; all agree on the member set {views.pop()} and on the parameters "
              f"({params.pop()}); no gradient delivered twice", flush=True)
        return 0
    print(f"launcher: FAILED: exit codes {codes}, finished {sorted(done)}, member sets {views}, "
          f"parameters {params}, duplicates {dups}", flush=True)
    return 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--launch", type=int, metavar="N",
                    help="start N ranks on this machine (torchrun-style variables) and report")
    ap.add_argument("--kill", type=int, metavar="RANK", help="with --launch: kill -9 this rank")
    ap.add_argument("--kill-at", type=int, default=30, metavar="STEP",
                    help="... once a rank reports this step (default 30)")
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--every", type=int, default=10, help="print every this many steps")
    ap.add_argument("--step-time", type=float, default=0.02, help="seconds of 'compute' per step")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--grace", type=float, default=1.0,
                    help="start-up grace (s): peers may still be starting")
    ap.add_argument("--linger", type=float, default=1.0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.launch:
        return launch(args)
    return worker(args)


if __name__ == "__main__":
    sys.exit(main())
