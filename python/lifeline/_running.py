"""``lifeline.start``: a node running over the TCP (or QUIC) driver on its own runtime threads.

Events reach Python three ways, one at a time per node: the iterator :meth:`RunningNode.events`
(blocking in 100 ms slices with the GIL released; Ctrl-C works), ``async for`` /
:meth:`RunningNode.next_event_async` for asyncio, or callbacks (:meth:`RunningNode.on_event`)
run on a Python thread of their own, never on the protocol's threads. Nothing is dropped: while
events stay unread the node back-pressures (commands raise ``Backpressure``), and heartbeats and
membership keep running.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import os
import threading
import time
import weakref
from typing import (
    TYPE_CHECKING,
    AsyncIterator,
    Callable,
    Dict,
    Iterable,
    Iterator,
    List,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    Union,
)

from . import _lifeline
from ._events import Event, from_raw
from ._lifeline import Backpressure, Closed, ForkError
from ._sansio import View, _view, as_bytes

if TYPE_CHECKING:
    from types import TracebackType

__all__ = ["RunningNode", "start"]

_log = logging.getLogger("lifeline")

# Longest wait of one call into the extension before signals and stop flags are checked.
_SLICE = 0.1

Peers = Union[Sequence[str], Mapping[int, str]]


class RunningNode:
    """A node running on its own runtime threads (made by :func:`start`).

    Close it with :meth:`close` or use it as a context manager; nodes still open at interpreter
    exit are closed then. A node belongs to the process that started it: any call from a fork's
    child raises :class:`ForkError` at once.
    """

    def __init__(self, inner: _lifeline.RunningNode) -> None:
        self._inner = inner
        self._pid = os.getpid()
        self._consumer: Optional[str] = None
        self._lock = threading.Lock()
        self._callback_thread: Optional[threading.Thread] = None
        self._stop = threading.Event()
        _LIVE.add(self)

    # -- what it is -------------------------------------------------------------------------

    @property
    def rank(self) -> int:
        """This rank."""
        return self._inner.rank

    @property
    def addr(self) -> str:
        """The address this node listens on (``host:port``)."""
        return self._inner.addr

    @property
    def span(self) -> int:
        """Ranks at start (``0..span``)."""
        return self._inner.span

    @property
    def launcher(self) -> Optional[str]:
        """The launcher ``bootstrap="env"`` found (``torchrun``, ``slurm``, ...), else ``None``."""
        return self._inner.launcher

    @property
    def closed(self) -> bool:
        """Whether the node is closed."""
        return self._inner.closed

    # -- events -----------------------------------------------------------------------------

    def _claim(self, how: str) -> None:
        with self._lock:
            if self._consumer not in (None, how):
                raise RuntimeError(
                    f"this node's events already go to {self._consumer}; "
                    f"use one way per node (iterator, asyncio or callback)"
                )
            self._consumer = how

    def next_event(self, timeout: Optional[float] = None) -> Event:
        """The next event, waiting up to ``timeout`` seconds (``None``: for ever) with the GIL
        released; raises :class:`TimeoutError` when none came, :class:`Closed` once closed."""
        self._claim("the iterator")
        raw = self._inner.recv(timeout)
        if raw is None:
            raise TimeoutError(f"no event within {timeout} s")
        return from_raw(raw)

    def poll_event(self) -> Optional[Event]:
        """The next event if one is ready now, else ``None``; never blocks."""
        self._claim("the iterator")
        raw = self._inner.try_recv()
        return None if raw is None else from_raw(raw)

    def events(self, timeout: Optional[float] = None) -> Iterator[Event]:
        """Iterates over events as they come. With ``timeout``, the iteration ends once no event
        came for ``timeout`` seconds; it also ends when the node is closed. Waits in 100 ms
        slices with the GIL released, checking signals in between (Ctrl-C raises
        ``KeyboardInterrupt``)."""
        self._claim("the iterator")
        while True:
            try:
                raw = self._inner.recv(timeout)
            except Closed:
                return
            if raw is None:
                return
            yield from_raw(raw)

    async def next_event_async(self, timeout: Optional[float] = None) -> Event:
        """The next event, for asyncio: the wait runs on an executor thread in short slices (the
        event loop never blocks); cancelling loses no event. Raises :class:`TimeoutError` when
        none came within ``timeout`` seconds, :class:`Closed` once closed."""
        self._claim("asyncio")
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            raw = self._inner.try_recv()
            if raw is not None:
                return from_raw(raw)
            left = _SLICE if deadline is None else min(_SLICE, deadline - loop.time())
            if left <= 0:
                raise TimeoutError(f"no event within {timeout} s")
            # `wait` only looks: an event it finds stays in the node for `try_recv`.
            await loop.run_in_executor(None, self._inner.wait, left)

    def __aiter__(self) -> AsyncIterator[Event]:
        return self._aevents()

    async def _aevents(self) -> AsyncIterator[Event]:
        while True:
            try:
                ev = await self.next_event_async()
            except Closed:
                return
            yield ev

    def on_event(self, callback: Callable[[Event], object]) -> threading.Thread:
        """Runs ``callback(event)`` for every event on a Python thread of its own
        (``lifeline-callbacks-<rank>``), never on the protocol's threads, until the node is
        closed. An exception in the callback is logged (logger ``lifeline``) and the next event
        goes on. A slow callback back-pressures the node; it never stops heartbeats. Returns
        the thread."""
        self._claim("a callback")
        if self._callback_thread is not None:
            raise RuntimeError("this node already has a callback")

        def run() -> None:
            while not self._stop.is_set():
                try:
                    raw = self._inner.recv(_SLICE)
                except (Closed, ForkError):
                    return
                if raw is None:
                    continue
                ev = from_raw(raw)
                try:
                    callback(ev)
                except Exception:  # noqa: BLE001 - a callback's error must not stop delivery
                    _log.exception("lifeline: callback %r raised on %r", callback, ev)

        t = threading.Thread(target=run, name=f"lifeline-callbacks-{self.rank}", daemon=True)
        self._callback_thread = t
        t.start()
        return t

    # -- commands ---------------------------------------------------------------------------

    def _retry(self, f: Callable[[], int], timeout: Optional[float]) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            try:
                return f()
            except Backpressure:
                if deadline is not None and time.monotonic() >= deadline:
                    raise
                left = _SLICE if deadline is None else min(_SLICE, deadline - time.monotonic())
                self._inner.writable(max(min(left, 0.005), 0.0))

    def xcast(self, tag: int, data: object, *, timeout: Optional[float] = 0.0) -> int:
        """Reliable broadcast of ``data`` under ``tag`` (1, or 16 and above) to every member;
        its sequence number. On back-pressure retries for up to ``timeout`` seconds (``None``:
        for ever; 0: raises :class:`Backpressure` at once). Raises :class:`NotAMember` once this
        rank was removed, ``ValueError`` for a reserved tag or an oversized payload."""
        p = as_bytes(data)
        return self._retry(lambda: self._inner.xcast(tag, p), timeout)

    def relm_send(
        self, dst: int, tag: int, data: object, *, timeout: Optional[float] = 0.0
    ) -> int:
        """Reliable message of ``data`` under ``tag`` to rank ``dst``; its uid. Retries on
        back-pressure as :meth:`xcast` does. Raises :class:`NotAMember` for a removed rank,
        :class:`Unreachable` when no route reaches it now."""
        p = as_bytes(data)
        return self._retry(lambda: self._inner.relm_send(dst, tag, p), timeout)

    def flood(self, data: object) -> int:
        """Best-effort flood of ``data`` to every rank; its id."""
        return self._inner.flood(as_bytes(data))

    def declare_dead(self, ranks: Iterable[int]) -> None:
        """Declares ``ranks`` dead on the caller's word (its launcher saw them exit)."""
        self._inner.declare_dead(list(ranks))

    def revoke(self, group: int, epoch: int) -> None:
        """Revokes ``group`` as of ``epoch``: :class:`Revoked` here and at every live rank,
        exactly once per (group, epoch). A repeat does nothing. Raises ``NotAMember``,
        ``ValueError`` (a newer epoch of the group is already revoked here)."""
        self._inner.revoke(group, epoch)

    def shrink(self, targets: Iterable[int]) -> int:
        """Starts a shrink campaign removing ``targets`` on purpose; its id (``requester << 32 |
        seq``). Every member then sees one :class:`Departed`, each target :class:`Left` (it
        stops taking commands: leave the loop and exit), and this node one
        :class:`CampaignCompleted` (or :class:`CampaignFailed` after
        ``membership_shrink_timeout_ns``). Raises ``Leaving`` (this rank is itself a target),
        ``NotAMember``, ``Backpressure`` (too many campaigns open), ``ValueError`` (no
        targets, a rank twice or outside the span, this rank unless it is the coordinator).
        The coordinator may be a target: it hands the coordination over to the next root
        without a failure, and leaves like any target."""
        return self._inner.shrink(list(targets))

    def view(self) -> View:
        """The agreed membership view applied here."""
        return _view(self._inner.view())

    def stats(self) -> Dict[str, int]:
        """The transport's and the core's (``core.*``) counters, the start-up
        (``core.startup_*``) and refused-dial (``core.membership_refusals_*``, ...) ones
        included."""
        return dict(self._inner.stats())

    # -- lifetime ---------------------------------------------------------------------------

    def close(self) -> None:
        """Stops the node: connections close (peers see the links go down), the runtime's
        threads end, a callback thread stops. Idempotent."""
        self._stop.set()
        self._inner.close()
        t = self._callback_thread
        if t is not None and t is not threading.current_thread():
            t.join(timeout=2 * _SLICE + 1.0)

    def __enter__(self) -> "RunningNode":
        return self

    def __exit__(
        self,
        exc_type: Optional[type],
        exc: Optional[BaseException],
        tb: Optional["TracebackType"],
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<lifeline.RunningNode rank={self.rank} addr={self.addr} closed={self.closed}>"


_LIVE: "weakref.WeakSet[RunningNode]" = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    """Closes this process's open nodes at interpreter exit (a fork's child leaves them)."""
    for n in list(_LIVE):
        if n._pid == os.getpid():
            try:
                n.close()
            except Exception:  # noqa: BLE001 - exit goes on
                pass


def _peers(peers: Optional[Peers]) -> Optional[List[Tuple[int, str]]]:
    if peers is None:
        return None
    if isinstance(peers, Mapping):
        return [(int(r), str(a)) for r, a in peers.items()]
    if isinstance(peers, (str, bytes)):
        raise TypeError("peers: a list of 'host:port' (index = rank) or a {rank: 'host:port'} dict")
    return [(r, str(a)) for r, a in enumerate(peers)]


def _ns(seconds: Optional[float]) -> Optional[int]:
    return None if seconds is None else int(seconds * 1e9)


def start(
    rank: Optional[int] = None,
    peers: Optional[Peers] = None,
    *,
    bootstrap: Optional[str] = None,
    rendezvous: Optional[str] = None,
    listen: Optional[str] = None,
    key: Union[bytes, str, None] = None,
    transport: str = "tcp",
    cert_dir: Optional[str] = None,
    cluster: Optional[str] = None,
    radix: int = 8,
    detect: bool = True,
    detect_period: Optional[float] = None,
    detect_timeout: Optional[float] = None,
    link_timeout: float = 3.0,
    dial_attempts: int = 10,
    startup_grace: float = 10.0,
    check_in: bool = True,
    startup_timeout: Optional[float] = None,
    bootstrap_timeout: float = 60.0,
    join_batch: float = 0.02,
    output_buffer: int = 4096,
    seed: Optional[int] = None,
    config: Optional[Mapping[str, int]] = None,
) -> RunningNode:
    """Starts a node, as ``lifeline node`` does, and returns once it listens.

    - ``rank`` and ``peers`` (every rank's ``host:port``: a list indexed by rank or a dict), or
      ``bootstrap="env"``: rank and size from the launcher's environment (torchrun's
      ``RANK``/``WORLD_SIZE``, Slurm, Open MPI, PMIx, Hydra) and the addresses from a rendezvous
      that rank 0 hosts at ``rendezvous`` (default ``MASTER_ADDR:MASTER_PORT``); ``listen``
      (default ``0.0.0.0:0``).
    - ``key``: the cluster secret (default: ``LIFELINE_CLUSTER_KEY``); ``transport="quic"`` with
      ``cert_dir`` and ``cluster`` uses certificates from ``lifeline certs`` instead.
    - Detector: ``detect`` (on), ``detect_period``/``detect_timeout`` (seconds),
      ``startup_grace`` (peers may still be starting: refused dials are retried, silence is not
      suspected), ``link_timeout``, ``dial_attempts``. ``config``: any core setting by key
      (``lifeline.CONFIG_KEYS``, durations in ``_ns``), applied last.
    - Start-up from check-ins (``check_in``, on by default, as under ``lifeline node``): each
      rank is admitted once the coordinator's notice lists it (:class:`CheckedIn`); every
      member gets one :class:`Ready` once every launched rank is in, all at the same epoch, or,
      after ``startup_timeout`` seconds (default: ``startup_grace``), one
      :class:`StartupIncomplete` naming the ranks that never started (removed, cause
      ``never_joined``, not failures; the others go on). ``check_in=False``: the launch is the
      member set from the start and no start-up events come (every node of a cluster must
      agree). The sans-IO :class:`Node` keeps the core's default, off
      (``config={"membership_check_in": 1}`` turns it on).

    Raises ``ValueError`` for wrong options, :class:`StartError` when starting fails.
    """
    cfg: Dict[str, int] = dict(config or {})
    for k, v in (("detect_period_ns", detect_period), ("detect_timeout_ns", detect_timeout)):
        ns = _ns(v)
        if ns is not None:
            cfg[k] = ns
    if isinstance(key, str):
        key = key.encode()
    inner = _lifeline.start(
        rank,
        _peers(peers),
        bootstrap=bootstrap,
        rendezvous=rendezvous,
        listen=listen,
        key=key,
        transport=transport,
        cert_dir=cert_dir,
        cluster=cluster,
        radix=radix,
        detect=detect,
        link_timeout=link_timeout,
        dial_attempts=dial_attempts,
        startup_grace=startup_grace,
        check_in=check_in,
        startup_timeout=startup_timeout,
        bootstrap_timeout=bootstrap_timeout,
        join_batch=join_batch,
        output_buffer=output_buffer,
        seed=seed,
        config=cfg or None,
    )
    return RunningNode(inner)


