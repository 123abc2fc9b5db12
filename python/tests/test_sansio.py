"""The sans-IO ``lifeline.Node``: three nodes driven in memory by a Python loop (frames carried
by a list, time advanced to each deadline)."""

from __future__ import annotations

from typing import Callable, Dict, Iterable, List, Optional, Set, Tuple

import pytest

import lifeline

MS = 1_000_000


class Net:
    """Three (or more) nodes, every link up, frames delivered at once, time jumping to the next
    deadline when nothing is in flight. ``absent``: ranks of the span whose process never
    starts (no node, no link, frames to them lost).

    It plays the transport on a shrink: a survivor that polls ``Departed`` closes its links to
    the departed ranks, and a target that polls ``Left`` exits (its links close); the other end
    sees ``closed`` once the frames sent before are delivered. ``probe(rank)`` runs after each
    drain of a rank."""

    def __init__(
        self,
        n: int = 3,
        radix: int = 2,
        config: Optional[Dict[str, int]] = None,
        absent: Iterable[int] = (),
    ) -> None:
        self.nodes = {
            r: lifeline.Node(r, n, radix, seed=r + 1, config=config)
            for r in range(n)
            if r not in set(absent)
        }
        self.now = 0
        self.events: Dict[int, List[lifeline.Event]] = {r: [] for r in self.nodes}
        self.crashed: Set[int] = set(absent)
        self.span = n
        self.closing: List[Tuple[int, int]] = []  # (rank, peer): rank sees its link closed
        self.probe: Optional[Callable[[int], None]] = None
        self.cut: Set[Tuple[int, int]] = set()  # (src, dst): frames from src to dst are lost
        for a in self.nodes:
            for b in self.nodes:
                if a != b:
                    self.nodes[a].handle_link_up(self.now, b)

    def live(self):
        return {r: n for r, n in self.nodes.items() if r not in self.crashed}

    def run(self, until_ms: int) -> None:
        end = self.now + until_ms * MS
        while True:
            flight = []
            for r, n in self.live().items():
                while (t := n.poll_transmit()) is not None:
                    flight.append((r, t))
                while (e := n.poll_event()) is not None:
                    self.events[r].append(e)
                    self._transport(r, e)
                if self.probe is not None:
                    self.probe(r)
            closing, self.closing = self.closing, []
            if flight or closing:
                for src, t in flight:
                    assert 0 <= t.to < self.span and t.to != src
                    if t.to in self.crashed or (src, t.to) in self.cut:
                        continue
                    assert t.cls in ("control", "data") and isinstance(t.frame, bytes)
                    self.nodes[t.to].handle_frame(self.now, src, t.frame)
                for rank, peer in closing:
                    if rank not in self.crashed:
                        self.nodes[rank].handle_link_down(self.now, peer, "closed")
                continue
            deadlines = [d for n in self.live().values() if (d := n.poll_timeout()) is not None]
            nxt = max(min(deadlines), self.now + MS) if deadlines else end + 1
            if nxt > end:
                self.now = end
                return
            self.now = nxt
            for n in self.live().values():
                n.handle_timeout(self.now)

    def _transport(self, r: int, e: lifeline.Event) -> None:
        if isinstance(e, lifeline.Departed):
            self.closing += [(t, r) for t in e.ranks if t != r]
        elif isinstance(e, lifeline.Left):
            self.crashed.add(r)
            self.closing += [(p, r) for p in self.nodes if p != r]

    def crash(self, r: int) -> None:
        """``r`` dies: its peers' links to it are refused from now on (hard evidence)."""
        self.crashed.add(r)
        for o, n in self.live().items():
            n.handle_link_down(self.now, r, "refused")

    def of(self, r: int, cls: type) -> list:
        return [e for e in self.events[r] if isinstance(e, cls)]


def test_xcast_is_delivered_once_everywhere():
    net = Net()
    seq = net.nodes[1].xcast(net.now, 16, b"hello")
    net.run(500)
    for r in range(3):
        got = net.of(r, lifeline.XcastDelivered)
        assert [(e.origin, e.seq, e.tag, e.payload) for e in got] == [(1, seq, 16, b"hello")]
    assert [e.seq for e in net.of(1, lifeline.XcastCompleted)] == [seq]


def test_relm_is_delivered_and_acknowledged():
    net = Net()
    uid = net.nodes[0].relm_send(net.now, 2, 5, bytearray(b"to two"))
    net.run(500)
    got = net.of(2, lifeline.RelmDelivered)
    assert [(e.src, e.uid, e.tag, e.payload) for e in got] == [(0, uid, 5, b"to two")]
    acks = net.of(0, lifeline.RelmAcked)
    assert acks and acks[-1].dst == 2 and acks[-1].upto >= uid


def test_a_crash_is_a_view_change_at_every_survivor():
    net = Net()
    net.run(10)
    net.crash(2)
    net.run(1000)
    for r in (0, 1):
        views = net.of(r, lifeline.ViewChanged)
        assert len(views) == 1, net.events[r]
        v = views[0]
        assert v.removed == (2,) and v.members == (0, 1) and v.causes == {2: "link_lost"}
        assert net.nodes[r].view().members == (0, 1)
        assert net.nodes[r].members() == (0, 1)
    # The removed rank is not a member any more: messages to it are refused.
    with pytest.raises(lifeline.NotAMember):
        net.nodes[0].relm_send(net.now, 2, 0, b"x")
    # The survivors go on: a broadcast reaches both once.
    net.nodes[0].xcast(net.now, 16, b"after")
    net.run(500)
    for r in (0, 1):
        assert [e.payload for e in net.of(r, lifeline.XcastDelivered)] == [b"after"]


def test_bad_input_is_a_python_exception():
    with pytest.raises(ValueError, match="outside the span"):
        lifeline.Node(3, 3)
    with pytest.raises(ValueError, match="unknown config key"):
        lifeline.Node(0, 3, config={"nope": 1})
    with pytest.raises(ValueError, match="does not fit"):
        lifeline.Node(0, 3, config={"detect_enabled": 7})
    n = lifeline.Node(0, 3, 2, config={"max_frame": 4096})
    with pytest.raises(ValueError, match="reserved"):
        n.xcast(0, 3, b"")
    with pytest.raises(ValueError, match="max_frame"):
        n.xcast(0, 16, b"x" * 5000)
    with pytest.raises(TypeError):
        n.xcast(0, 16, "text is not bytes")
    with pytest.raises(OverflowError):
        n.xcast(0, 1 << 16, b"")
    with pytest.raises(OverflowError):
        n.handle_frame(-1, 1, b"")
    with pytest.raises(ValueError, match="cause"):
        n.handle_link_down(0, 1, "bored")
    # Garbage from a peer is dropped and counted, never an exception.
    n.handle_frame(0, 1, b"\xff" * 64)
    n.handle_frame(0, 1, b"")
    assert n.poll_event() is None


# Start-up from check-ins (``membership_check_in``): off by default in the sans-IO node, as in
# the core; simulated time, so the start-up timeout costs nothing.
CHECK_IN = {
    "membership_check_in": 1,
    "membership_check_in_batch_ns": 5 * MS,
    "membership_check_in_resend_ns": 40 * MS,
    "xcast_retry_ns": 20 * MS,
}


def test_check_ins_are_off_by_default_in_the_sans_io_node():
    net = Net()
    net.run(500)
    for r in range(3):
        assert not [
            e
            for e in net.events[r]
            if isinstance(e, (lifeline.CheckedIn, lifeline.Ready, lifeline.StartupIncomplete))
        ], net.events[r]
        assert net.nodes[r].stats()["core.startup_check_ins_out"] == 0
        assert net.nodes[r].view() == lifeline.View(0, 3, (), (0, 1, 2))


def test_every_node_checks_in_and_is_ready_once_at_one_epoch():
    assert "membership_check_in" in lifeline.CONFIG_KEYS
    net = Net(config={**CHECK_IN, "membership_startup_timeout_ns": 2_000 * MS})
    net.run(1_000)
    epochs = set()
    for r in range(3):
        ready = net.of(r, lifeline.Ready)
        assert len(ready) == 1, net.events[r]
        assert ready[0].members == 3
        epochs.add(ready[0].epoch)
        checked_in = net.of(r, lifeline.CheckedIn)
        assert checked_in, net.events[r]
        ranks = sorted(x for e in checked_in for x in e.ranks)
        assert ranks == [0, 1, 2], f"rank {r}: each rank checks in once: {checked_in}"
        assert all(isinstance(e.ranks, tuple) for e in checked_in)
        assert all(1 <= e.epoch <= ready[0].epoch for e in checked_in)
        assert checked_in[-1].members == 3
        # Ready comes after the last check-in, and nothing was removed.
        evs = net.events[r]
        assert evs.index(ready[0]) > evs.index(checked_in[-1])
        assert not net.of(r, lifeline.StartupIncomplete) and not net.of(r, lifeline.ViewChanged)
        assert net.nodes[r].view().epoch == ready[0].epoch
        assert net.nodes[r].view().members == (0, 1, 2)
        s = net.nodes[r].stats()
        assert s["core.startup_check_ins_out"] >= 1
        assert s["core.startup_check_in_notices"] == len(checked_in)
        assert s["core.startup_never_joined_removed"] == 0
        for k in (
            "membership_refusals_out",
            "membership_refusals_in",
            "membership_probes_out",
            "membership_refusals_refuted",
            "membership_refusals_unconfirmed",
            "membership_decisions_held_overload",
        ):
            assert s[f"core.{k}"] == 0, k
    assert len(epochs) == 1, epochs
    assert net.nodes[0].stats()["core.startup_check_ins_in"] >= 2
    # The cluster works after start-up: a broadcast reaches everyone once.
    net.nodes[2].xcast(net.now, 16, b"after start-up")
    net.run(500)
    for r in range(3):
        assert [e.payload for e in net.of(r, lifeline.XcastDelivered)] == [b"after start-up"]


def test_a_node_that_never_starts_is_named_by_startup_incomplete():
    net = Net(
        4,
        config={**CHECK_IN, "membership_startup_timeout_ns": 300 * MS},
        absent=[3],
    )
    net.run(250)
    for r in range(3):
        assert not net.of(r, lifeline.StartupIncomplete), "before the start-up timeout"
    net.run(2_000)
    epochs = set()
    for r in range(3):
        inc = net.of(r, lifeline.StartupIncomplete)
        assert len(inc) == 1, net.events[r]
        assert inc[0].missing == (3,) and inc[0].members == 3
        epochs.add(inc[0].epoch)
        assert not net.of(r, lifeline.Ready), net.events[r]
        ranks = sorted(x for e in net.of(r, lifeline.CheckedIn) for x in e.ranks)
        assert ranks == [0, 1, 2]
        # The removal is a view change with cause never_joined, at the same epoch, before it.
        views = net.of(r, lifeline.ViewChanged)
        assert len(views) == 1, views
        v = views[0]
        assert (v.epoch, v.removed, v.causes, v.members) == (
            inc[0].epoch,
            (3,),
            {3: "never_joined"},
            (0, 1, 2),
        )
        assert net.events[r].index(v) < net.events[r].index(inc[0])
        assert net.nodes[r].view().removed == (3,)
        assert net.nodes[r].members() == (0, 1, 2)
    assert len(epochs) == 1, epochs
    assert net.nodes[0].stats()["core.startup_never_joined_removed"] == 1


def test_a_shrink_completes_once_and_every_survivor_sees_one_departure():
    # radix 2: 0 -> 1,2; 1 -> 3,4; 2 -> 5,6; 3 -> 7. Rank 5 (not the coordinator) shrinks 3 (which
    # has a child, 7) and 6.
    net = Net(8, config={"membership_shrink_max_pending": 1})
    targets = (3, 6)
    leaving_refused: Dict[int, int] = {}

    def probe(r: int) -> None:
        # A target in leaving mode refuses commands with ``Leaving`` (tried once each).
        n = net.nodes[r]
        if r in targets and r not in net.crashed and r not in leaving_refused:
            if n.stats()["core.shrink_leaving_entered"] == 1:
                with pytest.raises(lifeline.Leaving):
                    n.xcast(net.now, 16, b"x")
                with pytest.raises(lifeline.Leaving):
                    n.relm_send(net.now, 0, 16, b"x")
                with pytest.raises(lifeline.Leaving):
                    n.shrink(net.now, [1])
                leaving_refused[r] = 1

    net.probe = probe
    net.run(20)
    rq = net.nodes[5]
    cid = rq.shrink(net.now, [6, 3])
    assert cid == (5 << 32) | 1
    with pytest.raises(lifeline.Backpressure):
        rq.shrink(net.now, [4])
    net.run(2000)

    assert leaving_refused == {3: 1, 6: 1}
    done = net.of(5, lifeline.CampaignCompleted)
    assert len(done) == 1, net.events[5]
    assert done == [lifeline.CampaignCompleted(cid, targets, done[0].epoch)]
    assert not any(net.of(r, lifeline.CampaignFailed) for r in range(8))
    survivors = [r for r in range(8) if r not in targets]
    for r in range(8):
        assert not net.of(r, lifeline.ViewChanged), f"rank {r}: a failure verdict"
        assert not net.of(r, lifeline.Evicted)
    for r in targets:
        assert net.of(r, lifeline.Left) and len(net.of(r, lifeline.Left)) == 1
        assert net.nodes[r].stats()["core.shrink_leaving_entered"] == 1
        with pytest.raises(lifeline.NotAMember):
            net.nodes[r].xcast(net.now, 16, b"after leaving")
    for r in survivors:
        deps = net.of(r, lifeline.Departed)
        assert deps == [lifeline.Departed(done[0].epoch, targets, (cid,), tuple(survivors))], r
        assert not net.of(r, lifeline.Left)
        assert net.nodes[r].members() == tuple(survivors)
        assert net.nodes[r].view().members == tuple(survivors)
        assert net.nodes[r].stats()["core.shrink_departed"] == 2
    st = rq.stats()
    assert st["core.shrink_campaigns_requested"] == 1
    assert st["core.shrink_campaigns_completed"] == 1
    assert net.nodes[0].stats()["core.shrink_left_views"] == 1

    # The survivors go on: a broadcast from the moved rank 7 reaches each exactly once.
    seq = net.nodes[7].xcast(net.now, 16, b"after")
    net.run(500)
    for r in survivors:
        got = [e for e in net.of(r, lifeline.XcastDelivered) if e.payload == b"after"]
        assert [(e.origin, e.seq) for e in got] == [(7, seq)], r
    # The campaign is closed: the requester may start another.
    assert rq.shrink(net.now, [4]) == (5 << 32) | 2


def test_bad_shrink_requests_are_python_exceptions():
    net = Net(4)
    n = net.nodes[1]
    # Rank 0 (the coordinator) may be named since the planned hand-over (#22): not bad.
    for bad in ([], [2, 2], [4], [1]):
        with pytest.raises(ValueError):
            n.shrink(net.now, bad)
    with pytest.raises(OverflowError):
        n.shrink(net.now, [-1])
    with pytest.raises(TypeError):
        n.shrink(net.now, ["2"])  # type: ignore[list-item]
    assert n.stats()["core.shrink_campaigns_requested"] == 0
    assert n.shrink(net.now, iter([3])) == (1 << 32) | 1


def test_shrink_events_are_built_from_the_raw_tuples():
    from lifeline._events import from_raw

    cid = (4 << 32) | 2
    assert from_raw(("departed", 3, [1, 2], [cid], [0, 3])) == lifeline.Departed(
        3, (1, 2), (cid,), (0, 3)
    )
    assert from_raw(("left", 5)) == lifeline.Left(5)
    assert from_raw(("campaign_completed", cid, [1, 2], 3)) == lifeline.CampaignCompleted(
        cid, (1, 2), 3
    )
    assert from_raw(("campaign_failed", cid, "timed_out")) == lifeline.CampaignFailed(
        cid, "timed_out"
    )
    # The kinds that were tables of converters before keep their shapes.
    v = from_raw(("view_changed", 2, [(1, "declared")], [0, 2]))
    assert v == lifeline.ViewChanged(2, (1,), {1: "declared"}, (0, 2))
    j = from_raw(("joined", 4, [(5, "h:1")], [0, 5]))
    assert j == lifeline.Joined(4, ((5, "h:1"),), (0, 5))
    assert from_raw(("startup_incomplete", 1, [2], 2)).missing == (2,)  # type: ignore[union-attr]
    with pytest.raises(TypeError):
        from_raw(("left", 5, 6))


def test_a_revoke_reaches_every_live_rank_once_despite_an_unnoticed_crash():
    net = Net(12, radix=4)
    net.run(20)
    net.crashed.add(5)  # dead, and nobody has noticed: frames to it are lost
    net.nodes[3].revoke(net.now, 42, 7)
    assert net.nodes[3].poll_event() == lifeline.Revoked(42, 7, 3, 0)  # at once, here
    net.nodes[3].revoke(net.now, 42, 7)  # a repeat does nothing
    net.run(5)
    for r in net.live():
        got = net.of(r, lifeline.Revoked)
        want = [] if r == 3 else [(42, 7, 3)]  # the origin's was polled above
        assert [(e.group, e.epoch, e.origin) for e in got] == want, r
        assert all(e.hops > 0 for e in got)
        assert net.nodes[r].stats()["core.revoke_delivered"] == 1
    with pytest.raises(ValueError):
        net.nodes[3].revoke(net.now, 42, 6)  # stale: epoch 7 is revoked
    net.nodes[8].revoke(net.now, 42, 8)  # a newer epoch is a new revoke, from anyone
    net.run(5)
    assert all(len(net.of(r, lifeline.Revoked)) == (1 if r == 3 else 2) for r in net.live())
    assert net.nodes[3].stats()["core.revoke_started"] == 1
    assert from_raw_revoked() == lifeline.Revoked(1, 2, 3, 4)


def from_raw_revoked():
    from lifeline._events import from_raw

    return from_raw(("revoked", 1, 2, 3, 4))


def test_a_silent_tree_link_is_relayed_around_and_the_relay_ends_on_the_heal():
    # 8 ranks, radix 2: rank 3's parent is 1. Frames from 1 to 3 are lost (one way, the link
    # stays up): both ends see RelayStarted within a second, nobody is removed, and the
    # relays end once the link carries again.
    net = Net(8, radix=2, config={"detect_enabled": 1})
    net.run(300)
    net.cut.add((1, 3))
    net.run(1500)
    started = {(r, e.peer) for r in (1, 3) for e in net.of(r, lifeline.RelayStarted)}
    assert started == {(1, 3), (3, 1)}, started
    for r in (1, 3):
        (e,) = net.of(r, lifeline.RelayStarted)
        assert e.via is not None and e.via not in (1, 3)
    assert not any(net.of(r, lifeline.ViewChanged) for r in net.live())
    seq = net.nodes[0].xcast(net.now, 16, b"around")
    net.run(300)
    got = [e for e in net.of(3, lifeline.XcastDelivered) if e.payload == b"around"]
    assert [(e.origin, e.seq) for e in got] == [(0, seq)]
    net.cut.clear()
    net.run(2000)
    for r, p in ((1, 3), (3, 1)):
        assert [e.peer for e in net.of(r, lifeline.RelayEnded)] == [p], r
    assert net.nodes[3].stats()["core.membership_gray_on_silence"] >= 1
    assert from_raw_relay() == (lifeline.RelayStarted(3, None), lifeline.RelayEnded(3))


def from_raw_relay():
    from lifeline._events import from_raw

    return from_raw(("relay_started", 3, None)), from_raw(("relay_ended", 3))
