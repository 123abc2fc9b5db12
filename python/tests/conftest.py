"""Helpers shared by the tests: free loopback ports, worker processes speaking JSON lines."""

from __future__ import annotations

import json
import os
import queue
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

HERE = Path(__file__).resolve().parent


def free_ports(n: int) -> List[int]:
    """``n`` loopback ports that were free a moment ago."""
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


class Proc:
    """A Python child process whose stdout is one JSON object per line, read by a thread."""

    def __init__(self, args: List[str], env: Optional[Dict[str, str]] = None) -> None:
        e = dict(os.environ)
        e.update(env or {})
        self.p = subprocess.Popen(
            [sys.executable, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=e,
            text=True,
            bufsize=1,
        )
        self.lines: "queue.Queue[Dict[str, Any]]" = queue.Queue()
        self.seen: List[Dict[str, Any]] = []
        self.stderr: List[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_err, daemon=True).start()

    def _read(self) -> None:
        assert self.p.stdout is not None
        for line in self.p.stdout:
            try:
                self.lines.put(json.loads(line))
            except ValueError:
                self.lines.put({"event": "text", "text": line})

    def _read_err(self) -> None:
        assert self.p.stderr is not None
        for line in self.p.stderr:
            self.stderr.append(line)

    def send(self, line: str) -> None:
        assert self.p.stdin is not None
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()

    def expect(self, event: str, timeout: float = 20.0, **match: Any) -> Dict[str, Any]:
        """The next line with this ``event`` (and fields), within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(
                    f"no {event} {match} within {timeout} s; stderr: {''.join(self.stderr)[-2000:]}"
                )
            try:
                d = self.lines.get(timeout=left)
            except queue.Empty:
                continue
            self.seen.append(d)
            if d.get("event") == event and all(d.get(k) == v for k, v in match.items()):
                return d

    def drain(self, secs: float) -> List[Dict[str, Any]]:
        """Every line within the next ``secs`` seconds."""
        out = []
        deadline = time.monotonic() + secs
        while time.monotonic() < deadline:
            try:
                d = self.lines.get(timeout=max(deadline - time.monotonic(), 0.001))
            except queue.Empty:
                continue
            self.seen.append(d)
            out.append(d)
        return out

    def stop(self) -> None:
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait(timeout=10)


def torchrun_workers(n: int, env: Optional[Dict[str, str]] = None) -> List[Proc]:
    """``n`` processes of ``worker.py`` started as torchrun starts them (``RANK``,
    ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``/``MASTER_PORT`` on a free loopback port,
    a 0.5 s start-up grace), plus ``env``."""
    (port,) = free_ports(1)
    return [
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
