"""``lifeline.Node``: the sans-IO core, for runtimes that own their sockets and their loop."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Dict, Iterable, Mapping, NamedTuple, Optional, Tuple

from . import _lifeline
from ._events import Event, from_raw

__all__ = ["Node", "Transmit", "View", "as_bytes"]


class Transmit(NamedTuple):
    """One frame to send to rank ``to`` on the channel of its ``cls`` (``"control"`` frames must
    not queue behind ``"data"``). ``fence``: a notice to a removed rank; send it on a
    connection that is still open, drop it otherwise, never dial for it."""

    to: int
    cls: str
    frame: bytes
    fence: bool


@dataclass(frozen=True)
class View:
    """The agreed membership view applied here."""

    epoch: int
    span: int
    removed: Tuple[int, ...]
    members: Tuple[int, ...]


def as_bytes(data: object) -> bytes:
    """``data`` as :class:`bytes`: ``bytes`` as is, any other buffer (``bytearray``,
    ``memoryview``, a contiguous numpy array) copied; anything else is a ``TypeError``."""
    if isinstance(data, bytes):
        return data
    try:
        return memoryview(data).tobytes()  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(
            f"payload must be bytes or a buffer (bytearray, memoryview, numpy array), "
            f"not {type(data).__name__}"
        ) from None


def _view(raw: Tuple[int, int, Iterable[int], Iterable[int]]) -> View:
    epoch, span, removed, members = raw
    return View(epoch, span, tuple(removed), tuple(members))


class Node:
    """One rank of a Lifeline cluster, driven by the caller (the driving contract of the Rust
    core, one-to-one).

    Feed inputs with ``handle_frame``, ``handle_link_up``/``handle_link_down``,
    ``handle_timeout`` and the commands; after each, drain ``poll_transmit`` and ``poll_event``
    until ``None``; then arm one timer at ``poll_timeout()``. Times are integer nanoseconds
    (``time.monotonic_ns()`` or a virtual clock), never going backwards.

    ``config`` sets any core setting by key (``lifeline.CONFIG_KEYS``, durations in ``_ns``).
    Start-up from check-ins is off here, as in the core and the C ABI (view 0 is the whole
    span); ``config={"membership_check_in": 1}`` turns it on (every node of a cluster must
    agree): :class:`CheckedIn`, then one :class:`Ready`, or :class:`StartupIncomplete` after
    ``membership_startup_timeout_ns``. :func:`start` turns it on by default.
    """

    def __init__(
        self,
        rank: int,
        span: int,
        radix: int = 8,
        *,
        seed: int = 0,
        now_ns: int = 0,
        config: Optional[Mapping[str, int]] = None,
        dead: Optional[Iterable[int]] = None,
    ) -> None:
        self._inner = _lifeline.Node(
            rank,
            span,
            radix,
            seed=seed,
            now_ns=now_ns,
            config=dict(config) if config is not None else None,
            dead=list(dead) if dead is not None else None,
        )
        self._pid = os.getpid()

    @property
    def rank(self) -> int:
        """This rank."""
        return self._inner.rank

    def now_ns(self) -> int:
        """The protocol time (the latest ``now_ns`` fed)."""
        return self._inner.now_ns()

    def handle_frame(self, now_ns: int, src: int, frame: bytes) -> None:
        """A whole frame received from ``src``."""
        self._inner.handle_frame(now_ns, src, as_bytes(frame))

    def handle_link_up(self, now_ns: int, peer: int) -> None:
        """The link to ``peer`` is established."""
        self._inner.handle_link_up(now_ns, peer)

    def handle_link_down(self, now_ns: int, peer: int, cause: str = "reset") -> None:
        """The link to ``peer`` is lost: ``refused``/``incarnation`` (hard evidence: the peer is
        gone), ``reset``/``timed_out``/``closed`` (soft)."""
        self._inner.handle_link_down(now_ns, peer, cause)

    def handle_timeout(self, now_ns: int) -> None:
        """The deadline of :meth:`poll_timeout` passed."""
        self._inner.handle_timeout(now_ns)

    def poll_transmit(self) -> Optional[Transmit]:
        """The next frame to send, or ``None``."""
        t = self._inner.poll_transmit()
        return None if t is None else Transmit(*t)

    def poll_event(self) -> Optional[Event]:
        """The next event, or ``None``."""
        raw = self._inner.poll_event()
        return None if raw is None else from_raw(raw)

    def poll_timeout(self) -> Optional[int]:
        """When to call :meth:`handle_timeout` (nanoseconds), or ``None``."""
        return self._inner.poll_timeout()

    def xcast(self, now_ns: int, tag: int, data: object) -> int:
        """Reliable broadcast of ``data`` under ``tag`` (1, or 16 and above); its sequence
        number. Raises ``Backpressure``, ``NotAMember``, ``Leaving``, ``ValueError``."""
        return self._inner.xcast(now_ns, tag, as_bytes(data))

    def relm_send(self, now_ns: int, dst: int, tag: int, data: object) -> int:
        """Reliable message to ``dst``; its uid. Raises ``Backpressure``, ``NotAMember``,
        ``Unreachable``, ``ValueError``."""
        return self._inner.relm_send(now_ns, dst, tag, as_bytes(data))

    def flood(self, now_ns: int, data: object) -> int:
        """Best-effort flood to every rank; its id."""
        return self._inner.flood(now_ns, as_bytes(data))

    def declare_dead(self, now_ns: int, ranks: Iterable[int]) -> None:
        """Declares ``ranks`` dead on the caller's word (its launcher saw them exit)."""
        self._inner.declare_dead(now_ns, list(ranks))

    def grow(self, now_ns: int, new_span: int) -> None:
        """Grows the span to ``new_span`` (ranks granted out of band)."""
        self._inner.grow(now_ns, new_span)

    def revoke(self, now_ns: int, group: int, epoch: int) -> None:
        """Revokes ``group`` as of ``epoch`` (ULFM's ``MPIX_Comm_revoke``): this node gets
        :class:`Revoked` at once and a notice floods the live members, each of which gets it
        exactly once, despite up to the overlay's degree - 1 ranks dying meanwhile. A repeat
        does nothing. Raises ``NotAMember`` (this rank was removed), ``ValueError`` (a newer
        epoch of the group is already revoked here)."""
        self._inner.revoke(now_ns, group, epoch)

    def shrink(self, now_ns: int, targets: Iterable[int]) -> int:
        """Starts a shrink campaign removing ``targets`` on purpose; its id (``requester << 32 |
        seq``, the same number at every rank). The targets enter leaving mode (their commands
        raise ``Leaving``) and leave (:class:`Left`; close their connections and exit); every
        member removes them in one view change (:class:`Departed`, not a failure: close the
        connections to them); this node gets exactly one :class:`CampaignCompleted`, or one
        :class:`CampaignFailed` after ``membership_shrink_timeout_ns``. Raises ``Leaving``
        (this rank is itself a target), ``NotAMember``, ``Backpressure``
        (``membership_shrink_max_pending`` campaigns open), ``ValueError`` (no targets, a rank
        twice or outside the span, this rank unless it is the coordinator). The coordinator
        may be a target: it hands the coordination over to the next root."""
        return self._inner.shrink(now_ns, list(targets))

    def view(self) -> View:
        """The agreed view applied here."""
        return _view(self._inner.view())

    def members(self) -> Tuple[int, ...]:
        """The members as this node's events told them."""
        return tuple(self._inner.members())

    def links(self) -> Tuple[int, ...]:
        """The ranks this node wants a link to (its tree neighbours)."""
        return tuple(self._inner.links())

    def stats(self) -> Dict[str, int]:
        """The core's counters (the start-up ones as ``core.startup_*``, the refused-dial
        ones as ``core.membership_refusals_*``, ...)."""
        return dict(self._inner.stats())

    def __repr__(self) -> str:
        return f"<lifeline.Node rank={self.rank}>"
