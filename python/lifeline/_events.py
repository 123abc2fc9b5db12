"""The events a node reports, as typed, immutable objects.

The extension module hands each event over as a tuple ``(kind, fields...)``; :func:`from_raw`
builds the matching class. Payloads are :class:`bytes`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Optional, Tuple, Union

__all__ = [
    "Event",
    "XcastDelivered",
    "XcastCompleted",
    "RelmDelivered",
    "RelmAcked",
    "RelmFailed",
    "ViewChanged",
    "Joined",
    "CheckedIn",
    "Ready",
    "StartupIncomplete",
    "Evicted",
    "FloodDelivered",
    "Suspected",
    "TreeChanged",
    "LinkUp",
    "LinkDown",
    "Other",
    "from_raw",
]


@dataclass(frozen=True)
class XcastDelivered:
    """A reliable broadcast delivered here (once per broadcast at every member, in the same
    order everywhere)."""

    origin: int
    seq: int
    op: int
    tag: int
    payload: bytes = field(repr=False)


@dataclass(frozen=True)
class XcastCompleted:
    """A broadcast this rank started reached every member."""

    seq: int
    op: int


@dataclass(frozen=True)
class RelmDelivered:
    """A reliable message delivered here (once, in order per sender)."""

    src: int
    uid: int
    tag: int
    payload: bytes = field(repr=False)


@dataclass(frozen=True)
class RelmAcked:
    """Messages to ``dst`` up to ``upto`` were delivered there."""

    dst: int
    upto: int


@dataclass(frozen=True)
class RelmFailed:
    """``dst`` died before ``count`` messages from uid ``first`` on were delivered."""

    dst: int
    first: int
    count: int


@dataclass(frozen=True)
class ViewChanged:
    """The agreed view changed: ``removed`` left it (``causes``: why, per rank: ``link_lost``,
    ``unresponsive``, ``unreachable``, ``declared``, or ``never_joined``: launched but never
    checked in within the start-up timeout, not a failure); ``members`` is the new member set,
    ascending. Every survivor sees the same views in the same order."""

    epoch: int
    removed: Tuple[int, ...]
    causes: Dict[int, str]
    members: Tuple[int, ...]


@dataclass(frozen=True)
class Joined:
    """A view admitted joiners (``(rank, address)`` each); ``members`` is the new member set."""

    epoch: int
    joiners: Tuple[Tuple[int, str], ...]
    members: Tuple[int, ...]


@dataclass(frozen=True)
class CheckedIn:
    """Start-up from check-ins: the coordinator's notice admitting ``ranks`` (ascending) was
    applied here, at view ``epoch``; ``members`` is how many ranks are admitted so far and
    alive (a count). Every member applies the same notices in the same order."""

    epoch: int
    ranks: Tuple[int, ...]
    members: int


@dataclass(frozen=True)
class Ready:
    """Start-up is over: every launched rank checked in. Once per node, at every member, at the
    same ``epoch``; ``members`` is how many members that view has (a count)."""

    epoch: int
    members: int


@dataclass(frozen=True)
class StartupIncomplete:
    """Start-up is over without ``missing`` (ascending): they never checked in within the
    start-up timeout and were removed (a ``ViewChanged`` with cause ``never_joined``, not a
    failure). Once per node, at every member, at the same ``epoch``, instead of :class:`Ready`;
    ``members`` is how many members that view has. The application decides whether to go on
    with who is there."""

    epoch: int
    missing: Tuple[int, ...]
    members: int


@dataclass(frozen=True)
class Evicted:
    """This rank was removed from the cluster; it takes no more commands."""

    epoch: int


@dataclass(frozen=True)
class FloodDelivered:
    """A best-effort flood delivered here."""

    origin: int
    id: int
    payload: bytes = field(repr=False)


@dataclass(frozen=True)
class Suspected:
    """The heartbeat detector suspects ``rank`` (advisory: only a ``ViewChanged`` removes)."""

    rank: int


@dataclass(frozen=True)
class TreeChanged:
    """This rank's place in the routing tree changed (``slot`` is ``None`` once removed)."""

    slot: Optional[int]
    parent: Optional[int]


@dataclass(frozen=True)
class LinkUp:
    """A running node's link to ``peer`` is up."""

    peer: int


@dataclass(frozen=True)
class LinkDown:
    """A running node's link to ``peer`` is down (``reason`` in words)."""

    peer: int
    reason: str


@dataclass(frozen=True)
class Other:
    """Any other core event, by name, with its debug text."""

    name: str
    detail: str


Event = Union[
    XcastDelivered,
    XcastCompleted,
    RelmDelivered,
    RelmAcked,
    RelmFailed,
    ViewChanged,
    Joined,
    CheckedIn,
    Ready,
    StartupIncomplete,
    Evicted,
    FloodDelivered,
    Suspected,
    TreeChanged,
    LinkUp,
    LinkDown,
    Other,
]


def _view_changed(epoch: int, removed: Any, members: Any) -> ViewChanged:
    return ViewChanged(
        epoch,
        tuple(r for r, _ in removed),
        {r: c for r, c in removed},
        tuple(members),
    )


def _joined(epoch: int, joiners: Any, members: Any) -> Joined:
    return Joined(epoch, tuple((r, a) for r, a in joiners), tuple(members))


def _checked_in(epoch: int, ranks: Any, members: int) -> CheckedIn:
    return CheckedIn(epoch, tuple(ranks), members)


def _startup_incomplete(epoch: int, missing: Any, members: int) -> StartupIncomplete:
    return StartupIncomplete(epoch, tuple(missing), members)


_KINDS: Dict[str, Callable[..., Any]] = {
    "xcast_delivered": XcastDelivered,
    "xcast_completed": XcastCompleted,
    "relm_delivered": RelmDelivered,
    "relm_acked": RelmAcked,
    "relm_failed": RelmFailed,
    "view_changed": _view_changed,
    "joined": _joined,
    "checked_in": _checked_in,
    "ready": Ready,
    "startup_incomplete": _startup_incomplete,
    "evicted": Evicted,
    "flood_delivered": FloodDelivered,
    "suspected": Suspected,
    "tree_changed": TreeChanged,
    "link_up": LinkUp,
    "link_down": LinkDown,
    "other": Other,
}


def from_raw(raw: Tuple[Any, ...]) -> Event:
    """The typed event for the extension's tuple ``(kind, fields...)``."""
    ev: Event = _KINDS[raw[0]](*raw[1:])
    return ev
