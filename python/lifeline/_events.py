"""The events a node reports, as typed, immutable objects.

The extension module hands each event over as a tuple ``(kind, fields...)``; :func:`from_raw`
builds the matching class, registered under its kind by :func:`_kind`. Payloads are
:class:`bytes`; rank lists are tuples.

A shrink campaign's id (``Node.shrink``, :class:`Departed`, :class:`CampaignCompleted`,
:class:`CampaignFailed`) is one integer: ``requester << 32 | seq``, the requesting rank and its
own sequence number (1 for its first campaign), the same number at every rank.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Callable, Dict, Optional, Tuple, Type, TypeVar, Union

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
    "Departed",
    "Left",
    "CampaignCompleted",
    "CampaignFailed",
    "Revoked",
    "RelayStarted",
    "RelayEnded",
    "FloodDelivered",
    "Suspected",
    "TreeChanged",
    "LinkUp",
    "LinkDown",
    "Other",
    "from_raw",
]

_T = TypeVar("_T")

# The builder of each kind: the extension's fields in, the typed event out.
_KINDS: Dict[str, Callable[..., Any]] = {}


def _kind(
    name: str, adapt: Optional[Callable[..., Tuple[Any, ...]]] = None
) -> Callable[[Type[_T]], Type[_T]]:
    """Registers the decorated event class as kind ``name``: :func:`from_raw` passes the
    extension's fields (through ``adapt`` first, when the raw fields are not the class's),
    turning the lists of the fields typed ``Tuple`` into tuples."""

    def register(cls: Type[_T]) -> Type[_T]:
        as_tuple = [str(f.type).startswith("Tuple") for f in fields(cls)]  # type: ignore[arg-type]

        def build(*raw: Any) -> _T:
            args = adapt(*raw) if adapt is not None else raw
            if len(args) != len(as_tuple):
                raise TypeError(f"{name}: {len(args)} fields, {cls.__name__} has {len(as_tuple)}")
            return cls(*(tuple(a) if t else a for a, t in zip(args, as_tuple)))

        _KINDS[name] = build
        return cls

    return register


@_kind("xcast_delivered")
@dataclass(frozen=True)
class XcastDelivered:
    """A reliable broadcast delivered here (once per broadcast at every member, in the same
    order everywhere)."""

    origin: int
    seq: int
    op: int
    tag: int
    payload: bytes = field(repr=False)


@_kind("xcast_completed")
@dataclass(frozen=True)
class XcastCompleted:
    """A broadcast this rank started reached every member."""

    seq: int
    op: int


@_kind("relm_delivered")
@dataclass(frozen=True)
class RelmDelivered:
    """A reliable message delivered here (once, in order per sender)."""

    src: int
    uid: int
    tag: int
    payload: bytes = field(repr=False)


@_kind("relm_acked")
@dataclass(frozen=True)
class RelmAcked:
    """Messages to ``dst`` up to ``upto`` were delivered there."""

    dst: int
    upto: int


@_kind("relm_failed")
@dataclass(frozen=True)
class RelmFailed:
    """``dst`` died before ``count`` messages from uid ``first`` on were delivered."""

    dst: int
    first: int
    count: int


def _view_changed_fields(epoch: int, removed: Any, members: Any) -> Tuple[Any, ...]:
    """``ViewChanged``'s fields from the raw ``(rank, cause)`` pairs."""
    return (epoch, [r for r, _ in removed], {r: c for r, c in removed}, members)


@_kind("view_changed", _view_changed_fields)
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


@_kind("joined")
@dataclass(frozen=True)
class Joined:
    """A view admitted joiners (``(rank, address)`` each); ``members`` is the new member set."""

    epoch: int
    joiners: Tuple[Tuple[int, str], ...]
    members: Tuple[int, ...]


@_kind("checked_in")
@dataclass(frozen=True)
class CheckedIn:
    """Start-up from check-ins: the coordinator's notice admitting ``ranks`` (ascending) was
    applied here, at view ``epoch``; ``members`` is how many ranks are admitted so far and
    alive (a count). Every member applies the same notices in the same order."""

    epoch: int
    ranks: Tuple[int, ...]
    members: int


@_kind("ready")
@dataclass(frozen=True)
class Ready:
    """Start-up is over: every launched rank checked in. Once per node, at every member, at the
    same ``epoch``; ``members`` is how many members that view has (a count)."""

    epoch: int
    members: int


@_kind("startup_incomplete")
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


@_kind("evicted")
@dataclass(frozen=True)
class Evicted:
    """This rank was removed from the cluster; it takes no more commands."""

    epoch: int


@_kind("departed")
@dataclass(frozen=True)
class Departed:
    """A shrink campaign's targets departed: ``ranks`` (ascending) are out of the view as of
    ``epoch``, in one view change, the same list at every survivor. Not a failure: no
    :class:`ViewChanged` names them. ``campaigns``: the ids of the campaigns this view completes;
    ``members``: the new member set, ascending."""

    epoch: int
    ranks: Tuple[int, ...]
    campaigns: Tuple[int, ...]
    members: Tuple[int, ...]


@_kind("left")
@dataclass(frozen=True)
class Left:
    """This rank was a shrink target and left (drained, then excluded): it takes no more
    commands; exit cleanly. ``epoch``: the epoch it knew. Never followed by recovery."""

    epoch: int


@_kind("campaign_completed")
@dataclass(frozen=True)
class CampaignCompleted:
    """At the requester, exactly once: campaign ``id`` is complete: its targets ``removed``
    (ascending) are out of the view, the live ones by the view change of ``epoch``."""

    id: int
    removed: Tuple[int, ...]
    epoch: int


@_kind("campaign_failed")
@dataclass(frozen=True)
class CampaignFailed:
    """At the requester, at most once and instead of :class:`CampaignCompleted`: campaign ``id``
    could not complete; ``reason`` is ``timed_out`` (past ``membership_shrink_timeout_ns``) or
    ``requester_removed``. The coordinator may still complete it later."""

    id: int
    reason: str


@_kind("revoked")
@dataclass(frozen=True)
class Revoked:
    """``group`` is revoked as of ``epoch`` by ``origin`` (``Node.revoke``): stop its
    operations now. Once per (group, epoch) at every live rank, the origin included; never for
    an epoch older than one already revoked for the group. ``hops``: overlay hops the notice
    crossed (0 at the origin)."""

    group: int
    epoch: int
    origin: int
    hops: int


@_kind("relay_started")
@dataclass(frozen=True)
class RelayStarted:
    """Advisory: the tree link to ``peer`` is gray here (down, or silent for
    ``membership_gray_after_ns``, while both ends are alive): frames to ``peer`` now go through
    ``via`` (``None``: no live rank to relay through). Nobody is removed for it while the relay
    carries; exactly one :class:`RelayEnded` for ``peer`` follows before another start."""

    peer: int
    via: Optional[int]


@_kind("relay_ended")
@dataclass(frozen=True)
class RelayEnded:
    """Advisory: the relay around the tree link to ``peer`` ended (the link carries frames
    again, or ``peer`` is no longer a member or tree neighbour)."""

    peer: int


@_kind("flood_delivered")
@dataclass(frozen=True)
class FloodDelivered:
    """A best-effort flood delivered here."""

    origin: int
    id: int
    payload: bytes = field(repr=False)


@_kind("suspected")
@dataclass(frozen=True)
class Suspected:
    """The heartbeat detector suspects ``rank`` (advisory: only a ``ViewChanged`` removes)."""

    rank: int


@_kind("tree_changed")
@dataclass(frozen=True)
class TreeChanged:
    """This rank's place in the routing tree changed (``slot`` is ``None`` once removed)."""

    slot: Optional[int]
    parent: Optional[int]


@_kind("link_up")
@dataclass(frozen=True)
class LinkUp:
    """A running node's link to ``peer`` is up."""

    peer: int


@_kind("link_down")
@dataclass(frozen=True)
class LinkDown:
    """A running node's link to ``peer`` is down (``reason`` in words)."""

    peer: int
    reason: str


@_kind("other")
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
    Departed,
    Left,
    CampaignCompleted,
    CampaignFailed,
    Revoked,
    RelayStarted,
    RelayEnded,
    FloodDelivered,
    Suspected,
    TreeChanged,
    LinkUp,
    LinkDown,
    Other,
]


def from_raw(raw: Tuple[Any, ...]) -> Event:
    """The typed event for the extension's tuple ``(kind, fields...)``."""
    ev: Event = _KINDS[raw[0]](*raw[1:])
    return ev
