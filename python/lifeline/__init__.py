"""Lifeline for Python: a fault-tolerant control overlay for training frameworks and their
launchers: reliable broadcast (``xcast``), reliable messages (``relm_send``) and an agreed
member set that survives ``kill -9``.

Two levels, as in Rust:

- :func:`start` runs a node over TCP (or QUIC) on its own runtime threads, configured like
  ``lifeline node`` (``rank``/``peers`` or ``bootstrap="env"`` under torchrun, Slurm, Open MPI);
- :class:`Node` is the sans-IO core for runtimes that own their sockets and their loop.

::

    import lifeline
    with lifeline.start(bootstrap="env", key=b"secret") as node:
        node.xcast(16, b"hello")
        for ev in node.events(timeout=5):
            if isinstance(ev, lifeline.Ready):
                print("every launched rank is in, at epoch", ev.epoch)
            elif isinstance(ev, lifeline.ViewChanged):
                print("members now", ev.members)
"""

from ._events import (
    CampaignCompleted,
    CampaignFailed,
    CheckedIn,
    Departed,
    Event,
    Evicted,
    FloodDelivered,
    Joined,
    Left,
    LinkDown,
    LinkUp,
    Other,
    Ready,
    RelayEnded,
    RelayStarted,
    RelmAcked,
    RelmDelivered,
    RelmFailed,
    Revoked,
    StartupIncomplete,
    Suspected,
    TreeChanged,
    ViewChanged,
    XcastCompleted,
    XcastDelivered,
)
from ._lifeline import (
    CONFIG_KEYS,
    FIRST_APP_TAG,
    Backpressure,
    Closed,
    ForkError,
    Leaving,
    LifelineError,
    NotAMember,
    StartError,
    Unreachable,
    __version__,
)
from ._running import RunningNode, start
from ._sansio import Node, Transmit, View

__all__ = [
    "CONFIG_KEYS",
    "FIRST_APP_TAG",
    "Backpressure",
    "CampaignCompleted",
    "CampaignFailed",
    "CheckedIn",
    "Closed",
    "Departed",
    "Event",
    "Evicted",
    "FloodDelivered",
    "ForkError",
    "Joined",
    "Leaving",
    "Left",
    "LifelineError",
    "LinkDown",
    "LinkUp",
    "Node",
    "NotAMember",
    "Other",
    "Ready",
    "RelayEnded",
    "RelayStarted",
    "RelmAcked",
    "RelmDelivered",
    "RelmFailed",
    "Revoked",
    "RunningNode",
    "StartError",
    "StartupIncomplete",
    "Suspected",
    "Transmit",
    "TreeChanged",
    "Unreachable",
    "View",
    "ViewChanged",
    "XcastCompleted",
    "XcastDelivered",
    "__version__",
    "start",
]
