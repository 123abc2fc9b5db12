//! The driving contract of `lifeline_core` (see the crate documentation), tested through the
//! public API only: construction, one input at a time, drain after every input, one timer.
//!
//! Multi-node tests use [`Net`] (`lifeline_core::sim::testing`), the in-memory network in the
//! spirit of quinn-proto's test `Pair`: it drains every node's transmits into the destination's
//! `handle_frame` and advances virtual time to the earliest `poll_timeout`.

use std::collections::BTreeSet;
use std::panic::{catch_unwind, AssertUnwindSafe};

use bytes::Bytes;
use lifeline_core::sim::testing::Net;
use lifeline_core::tree::{LayoutError, Rank, RankSet, Scope, Tree, ViewDelta, MAX_SPAN};
use lifeline_core::wire::{
    AdoptMsg, Codec, FloodMsg, ForwardMsg, GlobalFailureMsg, Kind, LineageMsg, Message,
    RecoveredOpMsg, RelayMsg,
};
use lifeline_core::wire::{MembershipMsg, XcastMsg};
use lifeline_core::{
    xcast, Class, CommandError, Config, ConfigError, Duration, Event, Instant, Node, Stats,
    TimerKey, Transmit, MAX_FRAME, MIN_FRAME,
};
use lifeline_core::{
    FloodEvent, FloodTimer, LinkCause, MembershipEvent, MembershipTimer, RemovalCause, XcastError,
    XcastEvent,
};

// ---------------------------------------------------------------------------------------------
// Helpers and the in-memory network
// ---------------------------------------------------------------------------------------------

fn ms(n: u64) -> Instant {
    Instant::ZERO + Duration::from_millis(n)
}

fn node(span: u32, radix: u32, me: u32) -> Node {
    Node::new(Config::new(span, radix), Rank(me), 1, Instant::ZERO).unwrap()
}

fn transmits(n: &mut Node) -> Vec<Transmit> {
    std::iter::from_fn(|| n.poll_transmit()).collect()
}

/// The events waiting at `n`; a view change's member count is zeroed (checked where the
/// span is known, in the membership tests), its causes kept.
fn events(n: &mut Node) -> Vec<Event> {
    std::iter::from_fn(|| n.poll_event())
        .map(|mut e| {
            if let Event::Membership(MembershipEvent::FailureConfirmed { members, .. }) = &mut e {
                *members = 0;
            }
            e
        })
        .collect()
}

fn flood_frame(origin: u32, id: u64, hops: u16, payload: &'static [u8]) -> Bytes {
    Message::Flood(FloodMsg {
        origin: Rank(origin),
        id,
        hops,
        payload: Bytes::from_static(payload),
    })
    .encode()
}

fn delivered(origin: u32, id: u64, hops: u16, payload: &'static [u8]) -> Event {
    Event::Flood(FloodEvent::Delivered {
        origin: Rank(origin),
        id,
        hops,
        payload: Bytes::from_static(payload),
    })
}

fn ranks(v: &[u32]) -> Vec<Rank> {
    v.iter().copied().map(Rank).collect()
}

fn set(v: &[u32]) -> RankSet {
    v.iter().copied().map(Rank).collect()
}

/// A transmit's destination and decoded message (every transmit must decode).
fn decoded(t: &Transmit) -> (Rank, Message) {
    let m = Message::decode(t.frame.clone(), &Config::new(1, 2).limits()).unwrap();
    assert_eq!(t.class, m.kind().class());
    (t.to, m)
}

fn sent(n: &mut Node) -> Vec<(Rank, Message)> {
    transmits(n).iter().map(decoded).collect()
}

fn is_notice(m: &Message) -> bool {
    matches!(
        m,
        Message::Membership(MembershipMsg::Adopt(_))
            | Message::Membership(MembershipMsg::Lineage(_))
    )
}

/// The span of the 9-rank trees the notice tests use (notices carry their sender's span).
const NOTICE_SPAN: u32 = 9;

fn adopt(lineage: &[u32]) -> Message {
    Message::Membership(MembershipMsg::Adopt(AdoptMsg {
        span: NOTICE_SPAN,
        lineage: ranks(lineage),
    }))
}

fn lineage(lineage: &[u32], failed: &[u32]) -> Message {
    Message::Membership(MembershipMsg::Lineage(LineageMsg {
        span: NOTICE_SPAN,
        lineage: ranks(lineage),
        failed: ranks(failed),
    }))
}

/// The failure-knowledge notices (`node/notices.rs`) a rank with no xcast state sends after
/// learning a death locally, computed from the model tree after the death: an adoption notice
/// carrying its lineage to every child new in its slot (every child, if the slot moved), then
/// one lineage notice with the unconfirmed deaths to its parent (a hello if the parent changed,
/// a failure report otherwise). A root has no parent to tell: it broadcasts instead.
fn expected_notices(after: &Tree, delta: &ViewDelta) -> Vec<(Rank, Message)> {
    let Some(view) = after.view() else {
        return Vec::new();
    };
    let mut line = view.ancestors().to_vec();
    line.push(after.me());
    let adopted: Vec<Rank> = if delta.slot_changed() {
        view.live_children().collect()
    } else {
        delta.added_children().collect()
    };
    let mut out: Vec<(Rank, Message)> = adopted
        .into_iter()
        .map(|c| {
            let m = AdoptMsg {
                span: after.layout().span(),
                lineage: line.clone(),
            };
            (c, Message::Membership(MembershipMsg::Adopt(m)))
        })
        .collect();
    if let Some(p) = view.parent() {
        let failed = after
            .dead()
            .iter()
            .filter(|&r| !after.confirmed().contains(r))
            .collect();
        let m = LineageMsg {
            span: after.layout().span(),
            lineage: view.ancestors().to_vec(),
            failed,
        };
        out.push((p, Message::Membership(MembershipMsg::Lineage(m))));
    }
    out
}

/// The root's global failure notice as it forwards it to a child.
fn notice_of(m: &Message) -> Option<GlobalFailureMsg> {
    match m {
        Message::Xcast(XcastMsg::Forward(f)) if f.tag == xcast::TAG_FAILURE_NOTICE => Some(
            GlobalFailureMsg::from_payload(f.payload.clone(), &Config::new(1, 2).limits()).unwrap(),
        ),
        _ => None,
    }
}

/// A view change removing `r` on lost tree links (member count zeroed, as [`events`] does).
fn confirmed(epoch: u64, r: &[u32]) -> Event {
    Event::Membership(MembershipEvent::FailureConfirmed {
        epoch,
        ranks: set(r),
        causes: r
            .iter()
            .map(|&x| (Rank(x), RemovalCause::LinkLost))
            .collect(),
        members: 0,
    })
}

/// A view change removing `r` on lost tree links from a `span`-rank view with no other deaths.
fn confirmed_in(span: u32, epoch: u64, r: &[u32]) -> Event {
    let mut e = confirmed(epoch, r);
    if let Event::Membership(MembershipEvent::FailureConfirmed { members, .. }) = &mut e {
        *members = span - r.len() as u32;
    }
    e
}

/// Everything observable about a node that an input could change.
#[derive(Debug, PartialEq)]
struct Observed {
    now: Instant,
    stats: Stats,
    pending: usize,
    timeout: Option<(Instant, TimerKey)>,
    has_output: bool,
    view: Option<String>,
    dead: RankSet,
    links: Vec<Rank>,
    epoch: u64,
    watermarks: (u64, u64),
}

fn observe(n: &Node) -> Observed {
    Observed {
        now: n.now(),
        stats: n.stats().clone(),
        pending: n.pending_state(),
        timeout: n.poll_timeout(),
        has_output: n.has_output(),
        view: n.tree().view().map(|v| format!("{v:?}")),
        dead: n.tree().dead().clone(),
        links: n.links().collect(),
        epoch: n.epoch(),
        watermarks: n.xcast_watermarks(),
    }
}

/// Nodes joined by perfect in-order links, driven exactly as the contract says (the one test
/// harness, [`Net`]): one FIFO queue, every node drained after each delivery, timers fired at
/// their deadlines. It checks that no node asks to send to itself or to a rank it knows dead,
/// and that no deadline is left armed in the past.
fn contract_net(config: &Config, ranks: impl IntoIterator<Item = u32>) -> Net {
    Net::new(config, ranks).strict_deadlines(true)
}

// ---------------------------------------------------------------------------------------------
// 1. Construction
// ---------------------------------------------------------------------------------------------

#[test]
fn invalid_configs_are_errors_never_panics() {
    let base = || Config::new(10, 2);
    let with = |f: &dyn Fn(&mut Config)| {
        let mut c = base();
        f(&mut c);
        c
    };
    let cases: Vec<(&str, Config, u32, ConfigError)> = vec![
        (
            "radix 1",
            Config::new(10, 1),
            0,
            ConfigError::Layout(LayoutError::Radix(1)),
        ),
        (
            "radix 1025",
            Config::new(10, 1025),
            0,
            ConfigError::Layout(LayoutError::Radix(1025)),
        ),
        (
            "span 0",
            Config::new(0, 2),
            0,
            ConfigError::Layout(LayoutError::Span(0)),
        ),
        (
            "span u32::MAX",
            Config::new(u32::MAX, 2),
            0,
            ConfigError::Layout(LayoutError::Span(u64::from(u32::MAX))),
        ),
        (
            "dead rank out of range",
            with(&|c| {
                c.dead.insert(Rank(3));
                c.dead.insert(Rank(10));
            }),
            0,
            ConfigError::DeadOutOfRange {
                rank: Rank(10),
                span: 10,
            },
        ),
        (
            "max_frame too small",
            with(&|c| c.max_frame = MIN_FRAME - 1),
            0,
            ConfigError::MaxFrame(MIN_FRAME - 1),
        ),
        (
            "max_frame zero",
            with(&|c| c.max_frame = 0),
            0,
            ConfigError::MaxFrame(0),
        ),
        (
            "max_frame too large",
            with(&|c| c.max_frame = MAX_FRAME + 1),
            0,
            ConfigError::MaxFrame(MAX_FRAME + 1),
        ),
        (
            "max_list zero",
            with(&|c| c.max_list = 0),
            0,
            ConfigError::Zero("max_list"),
        ),
        (
            "max_transmits zero",
            with(&|c| c.max_transmits = 0),
            0,
            ConfigError::Zero("max_transmits"),
        ),
        (
            "max_events zero",
            with(&|c| c.max_events = 0),
            0,
            ConfigError::Zero("max_events"),
        ),
        (
            "max_floods zero",
            with(&|c| c.flood.max = 0),
            0,
            ConfigError::Zero("flood.max"),
        ),
        (
            "me out of range",
            base(),
            10,
            ConfigError::MeOutOfRange {
                rank: Rank(10),
                span: 10,
            },
        ),
        (
            "me far out of range",
            base(),
            u32::MAX,
            ConfigError::MeOutOfRange {
                rank: Rank(u32::MAX),
                span: 10,
            },
        ),
        (
            "me dead",
            with(&|c| {
                c.dead.insert(Rank(3));
            }),
            3,
            ConfigError::MeDead(Rank(3)),
        ),
    ];
    for (name, config, me, want) in cases {
        let r = catch_unwind(AssertUnwindSafe(|| {
            Node::new(config.clone(), Rank(me), 7, Instant::ZERO)
        }))
        .unwrap_or_else(|_| panic!("{name}: Node::new panicked"));
        let err = r.err().unwrap_or_else(|| panic!("{name}: accepted"));
        assert_eq!(err, want, "{name}");
        assert!(!err.to_string().is_empty(), "{name}: a clear message");
    }

    // The edges of each range are accepted.
    let ok = [
        with(&|c| c.max_frame = MIN_FRAME),
        with(&|c| c.max_frame = MAX_FRAME),
        with(&|c| {
            c.max_list = 1;
            c.max_transmits = 1;
            c.max_events = 1;
            c.flood.max = 1;
        }),
        with(&|c| {
            c.dead.insert(Rank(9));
        }),
        Config::new(1, 2),
        Config::new(10, 1024),
        Config::new(MAX_SPAN, 2),
    ];
    for c in ok {
        let n = Node::new(c.clone(), Rank(0), 7, Instant::ZERO);
        assert!(n.is_ok(), "{c:?}: {:?}", n.err());
    }
    // A configured dead set moves into the tree.
    let mut c = base();
    c.dead.insert(Rank(4));
    let n = Node::new(c, Rank(0), 7, Instant::ZERO).unwrap();
    assert!(n.config().dead.is_empty());
    assert_eq!(n.tree().dead().iter().collect::<Vec<_>>(), [Rank(4)]);
}

// ---------------------------------------------------------------------------------------------
// 2. The flood test protocol on a 9-rank radix-2 tree
//    0 -> {1, 2}, 1 -> {3, 5}, 2 -> {4, 6}, 3 -> {7}, 4 -> {8}
// ---------------------------------------------------------------------------------------------

#[test]
fn flood_from_a_leaf_reaches_every_rank_exactly_once() {
    let config = Config::new(9, 2);
    let mut net = contract_net(&config, 0..9);
    net.set_now(ms(1));
    let id = net
        .node_mut(8)
        .flood(ms(1), Bytes::from_static(b"hi"))
        .unwrap();
    assert_eq!(id, 1);
    net.pump();

    // Exactly n - 1 frames, one over every tree edge.
    assert_eq!(net.log().len(), 8);
    let edges: BTreeSet<(u32, u32)> = net
        .log()
        .iter()
        .map(|f| (f.from.0.min(f.to.0), f.from.0.max(f.to.0)))
        .collect();
    let tree_edges: BTreeSet<(u32, u32)> = [
        (0, 1),
        (0, 2),
        (1, 3),
        (1, 5),
        (2, 4),
        (2, 6),
        (3, 7),
        (4, 8),
    ]
    .into();
    assert_eq!(edges, tree_edges);
    assert_eq!(net.lost(), 0);
    assert_eq!(net.total(|s| s.frames_out), 8);
    assert_eq!(net.total(|s| s.frames_in), 8);
    assert_eq!(net.total(|s| s.flood.duplicates), 0);

    // Delivered exactly once everywhere, with the tree distance from 8 as hops.
    let hops = [3u16, 4, 2, 5, 1, 5, 3, 6, 0];
    let ev = net.take_events_by_rank();
    assert_eq!(ev.len(), 9);
    for (r, e) in ev {
        assert_eq!(e, vec![delivered(8, 1, hops[r.index()], b"hi")], "at {r}");
    }

    // A second flood from the same origin is a new id, and one from an inner rank is n - 1
    // frames too.
    assert_eq!(
        net.node_mut(8)
            .flood(ms(2), Bytes::from_static(b"b"))
            .unwrap(),
        2
    );
    assert_eq!(
        net.node_mut(2)
            .flood(ms(2), Bytes::from_static(b"c"))
            .unwrap(),
        1
    );
    net.pump();
    assert_eq!(net.log().len(), 8 + 8 + 8);
    for (r, e) in net.take_events_by_rank() {
        assert_eq!(e.len(), 2, "at {r}: {e:?}");
    }
    assert_eq!(net.total(|s| s.flood.duplicates), 0);
}

#[test]
fn flood_ids_are_deduplicated() {
    let config = Config::new(9, 2);
    let mut net = contract_net(&config, 0..9);
    net.node_mut(8)
        .flood(ms(0), Bytes::from_static(b"x"))
        .unwrap();
    net.pump();
    net.take_events_by_rank();
    // Replaying every frame of the flood to its receiver: all duplicates, nothing moves.
    let replay: Vec<_> = net.log().to_vec();
    for f in replay {
        net.node_mut(f.to).handle_frame(ms(1), f.from, f.frame);
    }
    net.pump();
    assert_eq!(net.log().len(), 8, "no new frames");
    assert!(net.take_events_by_rank().is_empty(), "no new deliveries");
    assert_eq!(net.total(|s| s.flood.duplicates), 8);
    assert_eq!(net.total(|s| s.frames_in), 16);

    // On one leaf: the same (origin, id) from anyone is a duplicate; another id or origin is not.
    let mut n = node(3, 2, 2);
    n.handle_frame(ms(1), Rank(0), flood_frame(1, 1, 2, b"a"));
    assert_eq!(events(&mut n), [delivered(1, 1, 2, b"a")]);
    assert!(transmits(&mut n).is_empty(), "a leaf forwards nothing");
    n.handle_frame(ms(2), Rank(0), flood_frame(1, 1, 2, b"a"));
    n.handle_frame(ms(3), Rank(1), flood_frame(1, 1, 7, b"different payload"));
    assert!(events(&mut n).is_empty());
    assert_eq!(n.stats().flood.duplicates, 2);
    n.handle_frame(ms(4), Rank(0), flood_frame(1, 2, 2, b"a"));
    n.handle_frame(ms(5), Rank(0), flood_frame(0, 1, 1, b"a"));
    assert_eq!(
        events(&mut n),
        [delivered(1, 2, 2, b"a"), delivered(0, 1, 1, b"a")]
    );
    assert_eq!(n.stats().flood.duplicates, 2);
    assert_eq!(n.stats().frames_in, 5);
}

#[test]
fn flood_sweep_fires_after_linger_and_state_drains() {
    let mut config = Config::new(9, 2);
    config.flood.linger = Duration::from_secs(10);
    let mut net = contract_net(&config, 0..9);
    net.set_now(ms(1_000));
    net.node_mut(8).flood(ms(1_000), Bytes::new()).unwrap();
    net.pump();
    for (r, n) in net.nodes() {
        // One remembered id and one armed sweep each, due exactly one linger later.
        assert_eq!(n.pending_state(), 2, "at {r}");
        assert_eq!(
            n.poll_timeout(),
            Some((ms(11_000), TimerKey::Flood(FloodTimer::Sweep)))
        );
    }
    net.run_until(ms(10_999));
    assert!(net.nodes().all(|(_, n)| n.pending_state() == 2));
    net.run_until(ms(11_000));
    for (r, n) in net.nodes() {
        assert_eq!(n.pending_state(), 0, "at {r}");
        assert_eq!(n.poll_timeout(), None, "at {r}");
        assert_eq!(n.stats().spurious_timeouts, 0);
        assert_eq!(n.stats().stale_timers, 0);
    }

    // Two floods 3 s apart: the sweep forgets the first, re-arms for the second.
    let mut n = node(9, 2, 0);
    n.flood(ms(0), Bytes::new()).unwrap();
    n.flood(ms(3_000), Bytes::new()).unwrap();
    transmits(&mut n);
    events(&mut n);
    assert_eq!(n.pending_state(), 3);
    assert_eq!(
        n.poll_timeout(),
        Some((ms(10_000), TimerKey::Flood(FloodTimer::Sweep)))
    );
    n.handle_timeout(ms(10_000));
    assert_eq!(n.pending_state(), 2);
    assert_eq!(
        n.poll_timeout(),
        Some((ms(13_000), TimerKey::Flood(FloodTimer::Sweep)))
    );
    n.handle_timeout(ms(13_000));
    assert_eq!(n.pending_state(), 0);
    assert_eq!(n.poll_timeout(), None);
    assert_eq!(n.stats().spurious_timeouts, 0);

    // Its own flood echoed back is refused by its origin, remembered or not: never a
    // duplicate, never delivered.
    let before = observe(&n);
    n.handle_frame(ms(14_000), Rank(1), flood_frame(0, 1, 9, b""));
    let mut want = before;
    want.stats.dropped_bad_origin += 1;
    want.now = ms(14_000);
    assert_eq!(observe(&n), want);

    // A received id lingers the same way and, once forgotten, is new again.
    n.handle_frame(ms(14_000), Rank(1), flood_frame(3, 1, 2, b"r"));
    assert_eq!(events(&mut n), [delivered(3, 1, 2, b"r")]);
    assert_eq!(transmits(&mut n).len(), 1, "forwarded to the other child");
    n.handle_frame(ms(23_999), Rank(2), flood_frame(3, 1, 2, b"r"));
    assert!(events(&mut n).is_empty());
    assert_eq!(n.stats().flood.duplicates, 1);
    n.handle_timeout(ms(24_000));
    assert_eq!(n.pending_state(), 0);
    n.handle_frame(ms(24_001), Rank(2), flood_frame(3, 1, 2, b"r"));
    assert_eq!(events(&mut n), [delivered(3, 1, 2, b"r")]);
    assert_eq!(n.stats().flood.duplicates, 1);
}

#[test]
fn spurious_timeouts_are_counted_no_ops() {
    let mut n = node(9, 2, 0);
    // Nothing armed at all.
    let before = observe(&n);
    n.handle_timeout(ms(0));
    let mut want = before;
    want.stats.spurious_timeouts = 1;
    assert_eq!(observe(&n), want);

    n.flood(ms(5), Bytes::from_static(b"p")).unwrap();
    assert_eq!(transmits(&mut n).len(), 2);
    assert_eq!(events(&mut n).len(), 1);
    let deadline = ms(5) + n.config().flood.linger;
    assert_eq!(
        n.poll_timeout(),
        Some((deadline, TimerKey::Flood(FloodTimer::Sweep)))
    );

    // Early: before the deadline (by a nanosecond), and at the current time.
    for early in [ms(6), Instant::from_nanos(deadline.as_nanos() - 1)] {
        let before = observe(&n);
        n.handle_timeout(early);
        let mut want = before;
        want.stats.spurious_timeouts += 1;
        want.now = early;
        assert_eq!(observe(&n), want, "early call at {early}");
    }
    assert_eq!(n.stats().spurious_timeouts, 3);

    // On time: fires once. Again at the same instant, or later: no-ops.
    n.handle_timeout(deadline);
    assert_eq!(n.pending_state(), 0);
    assert_eq!(n.stats().spurious_timeouts, 3);
    for again in [deadline, deadline + Duration::from_secs(1)] {
        let before = observe(&n);
        n.handle_timeout(again);
        let mut want = before;
        want.stats.spurious_timeouts += 1;
        want.now = again;
        assert_eq!(observe(&n), want);
    }
    assert_eq!(n.stats().spurious_timeouts, 5);
    assert_eq!(n.stats().stale_timers, 0);
    assert!(!n.has_output());
}

#[test]
fn time_going_backwards_is_clamped() {
    let mut n = node(9, 2, 1);
    let times = [5u64, 3, 9, 0, 9, 2, 20, 19];
    let mut latest = Instant::ZERO;
    for (i, &t) in times.iter().enumerate() {
        let t = ms(t);
        match i % 4 {
            0 => n.handle_frame(t, Rank(0), flood_frame(0, i as u64, 1, b"")),
            1 => n.handle_link_up(t, Rank(2)),
            2 => n.handle_timeout(t),
            _ => n.handle_frame(t, Rank(99), Bytes::new()),
        }
        transmits(&mut n);
        events(&mut n);
        latest = latest.max(t);
        assert_eq!(n.now(), latest, "input {i} at {t}");
    }
    assert_eq!(n.now(), ms(20));

    // Protocol time used by a command is the clamped one: the flood lingers from 20 ms.
    let mut m = node(9, 2, 0);
    m.handle_timeout(ms(20));
    m.flood(ms(1), Bytes::new()).unwrap();
    assert_eq!(m.now(), ms(20));
    let want = ms(20) + m.config().flood.linger;
    assert_eq!(
        m.poll_timeout(),
        Some((want, TimerKey::Flood(FloodTimer::Sweep)))
    );
    // A timeout "at" an earlier time than the deadline but after a backwards step still sees
    // the clamped time, so it is spurious.
    m.handle_timeout(ms(0));
    assert_eq!(m.pending_state(), 2);
    assert_eq!(m.now(), ms(20));
}

// ---------------------------------------------------------------------------------------------
// 3. Link loss and the dead set
// ---------------------------------------------------------------------------------------------

#[test]
fn tree_link_down_repairs_once_with_the_tree_delta() {
    // The named case: rank 1 loses child 3; 7 is promoted into 3's slot.
    let mut n = node(9, 2, 1);
    n.handle_link_up(ms(1), Rank(3));
    n.handle_link_up(ms(1), Rank(0));
    assert_eq!(n.links().collect::<Vec<_>>(), [Rank(0), Rank(3)]);
    n.handle_link_down(ms(2), Rank(3), LinkCause::Refused);
    let mut model = Tree::new(9, 2, Rank(1)).unwrap();
    let want = model.mark_dead(&[Rank(3)], Scope::Local).unwrap().unwrap();
    let ev = events(&mut n);
    assert_eq!(ev, [Event::ViewChanged(want.clone())]);
    assert_eq!(want.removed_children().collect::<Vec<_>>(), [Rank(3)]);
    assert_eq!(want.added_children().collect::<Vec<_>>(), [Rank(7)]);
    let view = n.tree().view().unwrap();
    assert_eq!(view.children(), [Some(Rank(7)), Some(Rank(5))]);
    assert_eq!(view, model.view().unwrap());
    assert!(n.tree().dead().contains(Rank(3)));
    assert!(!n.tree().confirmed().contains(Rank(3)), "learned locally");
    assert_eq!(n.links().collect::<Vec<_>>(), [Rank(0)]);
    // 7 is adopted with its new lineage, and the parent hears of the death.
    assert_eq!(
        sent(&mut n),
        [(Rank(7), adopt(&[0, 1])), (Rank(0), lineage(&[0], &[3]))]
    );
    assert_eq!(n.stats().lateral_link_downs, 0);

    // The same loss reported again (an echo of the repair) is ignored entirely.
    let before = observe(&n);
    n.handle_link_down(ms(3), Rank(3), LinkCause::Refused);
    let mut want = before;
    want.now = ms(3);
    assert_eq!(observe(&n), want);
    assert!(events(&mut n).is_empty() && transmits(&mut n).is_empty());

    // Every (rank, tree neighbour) pair of the 9-rank tree: one ViewChanged event with the
    // model's delta, exactly the notices the model predicts, and nothing else but a root's
    // broadcast machinery towards its children.
    let mut roots = 0;
    for me in 0..9 {
        let fresh = node(9, 2, me);
        let view = fresh.tree().view().unwrap();
        let neighbours: Vec<Rank> = view
            .parent()
            .into_iter()
            .chain(view.live_children())
            .collect();
        for p in neighbours {
            let ctx = format!("{me} loses {p}");
            let mut n = node(9, 2, me);
            n.handle_link_down(ms(1), p, LinkCause::Refused);
            let mut model = Tree::new(9, 2, Rank(me)).unwrap();
            let delta = model.mark_dead(&[p], Scope::Local).unwrap().unwrap();
            let view = model.view().unwrap();
            assert_eq!(n.tree().view(), model.view(), "{ctx}");
            let out = sent(&mut n);
            let notices: Vec<(Rank, Message)> =
                out.iter().filter(|(_, m)| is_notice(m)).cloned().collect();
            assert_eq!(notices, expected_notices(&model, &delta), "{ctx}");
            let others: Vec<&(Rank, Message)> = out.iter().filter(|(_, m)| !is_notice(m)).collect();
            for (to, m) in &others {
                assert!(view.is_root(), "{ctx}: {m:?} from a non-root");
                assert!(
                    view.live_children().any(|c| c == *to),
                    "{ctx}: {m:?} to {to}"
                );
                assert!(
                    !matches!(m, Message::Flood(_) | Message::Xcast(XcastMsg::Relay(_))),
                    "{ctx}: {m:?}"
                );
            }
            assert_eq!(events(&mut n), [Event::ViewChanged(delta.clone())], "{ctx}");
            assert!(n.tree().confirmed().is_empty(), "{ctx}");
            if view.is_root() && !delta.slot_changed() {
                // The root lost a child: after the batching delay it confirms the death
                // (epoch 1) and forwards the notice to each remaining child.
                roots += 1;
                let batch = n.config().membership.notice_batch;
                assert_eq!(
                    n.poll_timeout(),
                    Some((
                        ms(1) + batch,
                        TimerKey::Membership(MembershipTimer::Announce)
                    )),
                    "{ctx}"
                );
                n.handle_timeout(ms(1) + batch);
                assert_eq!(events(&mut n), [confirmed(1, &[p.0])], "{ctx}");
                assert_eq!(n.epoch(), 1);
                assert!(n.tree().confirmed().contains(p), "{ctx}");
                let out = sent(&mut n);
                let notice = GlobalFailureMsg {
                    epoch: 1,
                    failed: vec![p],
                    causes: vec![RemovalCause::LinkLost],
                };
                let to: Vec<Rank> = out
                    .iter()
                    .filter(|(_, m)| notice_of(m).as_ref() == Some(&notice))
                    .map(|(to, _)| *to)
                    .collect();
                assert_eq!(to, view.live_children().collect::<Vec<_>>(), "{ctx}");
                assert!(
                    out.iter().all(|(_, m)| notice_of(m).is_some()),
                    "{ctx}: {out:?}"
                );
            }
            assert_eq!(n.stats().lateral_link_downs, 0);
            assert!(!n.has_output());
        }
    }
    assert_eq!(roots, 2);
}

#[test]
fn lateral_link_down_is_counted_and_changes_no_view() {
    for me in 0..9u32 {
        let fresh = node(9, 2, me);
        let view = fresh.tree().view().unwrap();
        for q in (0..9)
            .map(Rank)
            .filter(|&q| q != Rank(me) && !view.is_neighbor(q))
        {
            let mut n = node(9, 2, me);
            n.handle_link_up(ms(1), q);
            assert_eq!(n.links().collect::<Vec<_>>(), [q]);
            let before = observe(&n);
            n.handle_link_down(ms(1), q, LinkCause::Refused);
            assert!(events(&mut n).is_empty(), "{me} loses lateral {q}");
            let mut want = before;
            want.stats.lateral_link_downs = 1;
            want.links.clear();
            assert_eq!(observe(&n), want, "{me} loses lateral {q}");
        }
    }
    // A link-up or link-down for a rank outside the span is an unknown peer: a counted drop,
    // never a link and never a repair.
    let mut n = node(9, 2, 1);
    n.handle_link_up(ms(1), Rank(9));
    assert_eq!(n.links().count(), 0);
    n.handle_link_down(ms(1), Rank(9), LinkCause::Refused);
    n.handle_link_down(ms(1), Rank(u32::MAX), LinkCause::Refused);
    assert_eq!(n.stats().dropped_unknown_peer, 3);
    assert_eq!(n.stats().dropped_stale_sender, 0);
    assert_eq!(n.stats().lateral_link_downs, 0);
    assert!(events(&mut n).is_empty());
    assert!(n.tree().dead().is_empty());
}

#[test]
fn no_transmit_is_ever_addressed_to_a_dead_rank() {
    // After the loss, floods route around 3.
    let mut n = node(9, 2, 1);
    n.handle_link_down(ms(1), Rank(3), LinkCause::Refused);
    events(&mut n);
    let to: Vec<Rank> = transmits(&mut n).iter().map(|t| t.to).collect();
    assert_eq!(
        to,
        [Rank(7), Rank(0)],
        "the adoption and the failure notice"
    );
    n.flood(ms(2), Bytes::from_static(b"f")).unwrap();
    let to: Vec<Rank> = transmits(&mut n).iter().map(|t| t.to).collect();
    assert_eq!(to, [Rank(0), Rank(7), Rank(5)]);
    assert_eq!(events(&mut n), [delivered(1, 1, 0, b"f")]);
    assert_eq!(
        n.stats().suppressed_to_dead,
        0,
        "nothing was even attempted"
    );
    // Frames and link-ups from the dead rank are stale.
    n.handle_frame(ms(3), Rank(3), flood_frame(3, 1, 0, b""));
    n.handle_link_up(ms(3), Rank(3));
    assert_eq!(n.stats().dropped_stale_sender, 2);
    assert_eq!(n.links().count(), 0);
    assert!(!n.has_output());

    // A driver that has not yet drained when it learns of the death: the transmit queued to 3
    // before the loss is never handed out, and is counted.
    let mut n = node(9, 2, 1);
    n.flood(ms(1), Bytes::from_static(b"g")).unwrap();
    n.handle_link_down(ms(2), Rank(3), LinkCause::Refused);
    let out = sent(&mut n);
    let to: Vec<(Rank, Kind)> = out.iter().map(|(to, m)| (*to, m.kind())).collect();
    assert_eq!(
        to,
        [
            (Rank(0), Kind::Flood),
            (Rank(5), Kind::Flood),
            (Rank(7), Kind::Adopt),
            (Rank(0), Kind::Lineage)
        ]
    );
    assert_eq!(n.stats().suppressed_to_dead, 1);
    assert_eq!(n.stats().frames_out, 3 + 2);
    assert_eq!(events(&mut n).len(), 2, "delivery and the view change");

    // Globally: every survivor knows 3 is dead; a flood from the leaf 8 reaches the 8
    // survivors over the repaired tree in 7 frames, none towards 3 (the net asserts that).
    let config = Config::new(9, 2);
    let mut net = contract_net(&config, (0..9).filter(|&r| r != 3));
    let dead: RankSet = [Rank(3)].into_iter().collect();
    for (_, n) in net.nodes_mut() {
        n.declare_dead(ms(0), &dead).unwrap();
    }
    net.pump();
    net.take_events_by_rank();
    net.clear_log();
    net.node_mut(8).flood(ms(1), Bytes::new()).unwrap();
    net.pump();
    assert_eq!(net.log().len(), 7);
    assert!(net.log().iter().all(|f| f.to != Rank(3)));
    assert_eq!(net.lost(), 0);
    let ev = net.take_events_by_rank();
    assert_eq!(ev.len(), 8);
    assert!(ev.values().all(|e| e.len() == 1));
}

// ---------------------------------------------------------------------------------------------
// 3b. Failure knowledge: lineage notices up, adoption notices down, the root's global notice
// ---------------------------------------------------------------------------------------------

/// Fires every timer due up to `until`, in order.
fn run_timers(n: &mut Node, until: Instant) {
    while let Some((at, _)) = n.poll_timeout().filter(|&(at, _)| at <= until) {
        n.handle_timeout(at);
    }
}

#[test]
fn a_childs_lineage_notice_teaches_the_parent_and_the_root_confirms() {
    // The root hears from child 1 that 3 (a grandchild) died.
    let mut root = node(9, 2, 0);
    root.handle_frame(ms(1), Rank(1), lineage(&[0], &[3]).encode());
    assert_eq!(root.tree().dead(), &set(&[3]));
    assert!(root.tree().confirmed().is_empty());
    assert!(
        events(&mut root).is_empty(),
        "3 is not the root's neighbour: no view change"
    );
    let early = sent(&mut root);
    assert!(
        early.iter().all(|(to, m)| *to == Rank(1) && !is_notice(m)),
        "only answers to the child's hello: {early:?}"
    );
    // After the batching delay, one global notice: applied at the root and forwarded to both
    // children.
    let batch = root.config().membership.notice_batch;
    assert_eq!(
        root.poll_timeout(),
        Some((
            ms(1) + batch,
            TimerKey::Membership(MembershipTimer::Announce)
        ))
    );
    root.handle_timeout(ms(1) + batch);
    assert_eq!(events(&mut root), [confirmed(1, &[3])]);
    assert_eq!(root.epoch(), 1);
    assert_eq!(root.tree().confirmed(), &set(&[3]));
    let out = sent(&mut root);
    let want = GlobalFailureMsg {
        epoch: 1,
        failed: ranks(&[3]),
        causes: vec![RemovalCause::LinkLost],
    };
    let to: Vec<Rank> = out
        .iter()
        .filter(|(_, m)| notice_of(m).as_ref() == Some(&want))
        .map(|(to, _)| *to)
        .collect();
    assert_eq!(to, [Rank(1), Rank(2)]);
    assert!(out.iter().all(|(_, m)| notice_of(m).is_some()), "{out:?}");
    // The same report again, or one naming only known or impossible deaths (the receiver
    // itself, a rank outside the span), teaches nothing and announces nothing.
    for m in [
        lineage(&[0], &[3]),
        lineage(&[0], &[0, 9, 3]),
        lineage(&[0], &[]),
    ] {
        root.handle_frame(ms(2), Rank(1), m.encode());
        sent(&mut root);
        assert_eq!(root.tree().dead(), &set(&[3]));
        assert!(events(&mut root).is_empty());
        run_timers(&mut root, ms(100));
        assert!(events(&mut root).is_empty());
        assert!(transmits(&mut root).is_empty());
        assert_eq!(root.epoch(), 1);
    }
    assert_eq!(
        root.stats().membership.stale + root.stats().membership.inconsistent,
        0
    );

    // An inner rank learns the death and passes it up; only the root confirms.
    let mut n = node(9, 2, 1);
    n.handle_frame(ms(1), Rank(3), lineage(&[0, 1], &[7]).encode());
    assert_eq!(n.tree().dead(), &set(&[7]));
    assert!(n.tree().confirmed().is_empty());
    assert!(
        events(&mut n).is_empty(),
        "7 is 3's child: 1's view is unchanged"
    );
    let out = sent(&mut n);
    let notices: Vec<(Rank, Message)> = out.iter().filter(|(_, m)| is_notice(m)).cloned().collect();
    assert_eq!(notices, [(Rank(0), lineage(&[0], &[7]))]);
    assert!(
        out.iter().all(|(to, m)| is_notice(m) || *to == Rank(3)),
        "{out:?}"
    );
    run_timers(&mut n, ms(100));
    assert_eq!(n.epoch(), 0);
    assert!(events(&mut n).is_empty() && !n.has_output());
    // A notice whose lineage does not end at the receiver is stale (its deaths still count).
    n.handle_frame(ms(2), Rank(5), lineage(&[0, 2], &[]).encode());
    assert_eq!(n.stats().membership.stale, 1);
    assert_eq!(n.tree().dead(), &set(&[7]));
    assert!(events(&mut n).is_empty());

    // End to end: 3 loses its child 7; the report climbs 3 -> 1 -> 0 and the root's notice
    // reaches every survivor exactly once.
    let config = Config::new(9, 2);
    let mut net = contract_net(&config, (0..9).filter(|&r| r != 7));
    net.node_mut(3)
        .handle_link_down(ms(1), Rank(7), LinkCause::Refused);
    net.run_until(ms(1_000));
    let ups: Vec<(Rank, Rank)> = net
        .log()
        .iter()
        .filter(|f| f.frame[1] == Kind::Lineage.byte())
        .map(|f| (f.from, f.to))
        .collect();
    assert_eq!(ups, [(Rank(3), Rank(1)), (Rank(1), Rank(0))]);
    assert_eq!(net.lost(), 0);
    let ev = net.take_events_by_rank();
    for (r, n) in net.nodes() {
        let got: Vec<&Event> = ev[&r]
            .iter()
            .filter(|e| {
                matches!(
                    e,
                    Event::Membership(MembershipEvent::FailureConfirmed { .. })
                )
            })
            .collect();
        assert_eq!(got, [&confirmed_in(9, 1, &[7])], "at {r}");
        assert_eq!(n.tree().confirmed(), &set(&[7]), "at {r}");
        assert_eq!(n.epoch(), 1, "at {r}");
        assert!(!n.has_output());
    }
}

#[test]
fn an_adoption_notice_implying_a_death_is_inferred() {
    // Radix 2, span 9: 5's ancestors are [0, 1]. Adopted by 0 directly, it infers that 1 died
    // and takes 1's slot.
    let mut n = node(9, 2, 5);
    n.handle_frame(ms(1), Rank(0), adopt(&[0]).encode());
    let mut model = Tree::new(9, 2, Rank(5)).unwrap();
    let delta = model.mark_dead(&[Rank(1)], Scope::Local).unwrap().unwrap();
    assert!(delta.promoted);
    assert_eq!(n.tree().dead(), &set(&[1]));
    assert!(n.tree().confirmed().is_empty(), "inferred, not confirmed");
    let view = n.tree().view().unwrap();
    assert_eq!(view.slot(), Rank(1));
    assert_eq!(view.ancestors(), [Rank(0)]);
    assert_eq!(view.children(), [Some(Rank(3))]);
    assert_eq!(n.tree().view(), model.view());
    assert_eq!(events(&mut n), [Event::ViewChanged(delta)]);
    // Its new child 3 is adopted with the new lineage, then its new parent hears of the death
    // (the answer to the adoption may repeat that hello).
    let out = sent(&mut n);
    assert_eq!(out[0], (Rank(3), adopt(&[0, 5])));
    let hello = (Rank(0), lineage(&[0], &[1]));
    assert!(
        (2..=3).contains(&out.len()) && out[1..].iter().all(|x| *x == hello),
        "{out:?}"
    );
    assert_eq!(
        n.stats().membership.stale + n.stats().membership.inconsistent,
        0
    );
    assert_eq!(n.epoch(), 0);

    // Agreed: the parent re-adopting with the current lineage changes nothing; the child
    // answers with a hello carrying no deaths.
    let mut n = node(9, 2, 5);
    let before = observe(&n);
    n.handle_frame(ms(1), Rank(1), adopt(&[0, 1]).encode());
    assert_eq!(sent(&mut n), [(Rank(1), lineage(&[0, 1], &[]))]);
    assert!(events(&mut n).is_empty());
    let mut want = before;
    want.now = ms(1);
    want.stats.frames_in += 1;
    want.stats.frames_out += 1;
    assert_eq!(observe(&n), want);

    // Stale (names a rank known dead) and inconsistent (longer than the lineage can be,
    // naming the receiver, or not ending with its sender) notices are counted and teach
    // nothing.
    let mut n = node(9, 2, 5);
    n.declare_dead(ms(0), &set(&[2])).unwrap();
    events(&mut n);
    transmits(&mut n);
    for (m, stale, inconsistent) in [
        (adopt(&[0, 2, 1]), 1, 0),
        (adopt(&[0, 1, 3, 1]), 1, 1),
        (adopt(&[0, 5, 1]), 1, 2),
        (adopt(&[0, 3]), 1, 3),
    ] {
        n.handle_frame(ms(1), Rank(1), m.encode());
        assert_eq!(n.stats().membership.stale, stale, "{m:?}");
        assert_eq!(n.stats().membership.inconsistent, inconsistent, "{m:?}");
        assert_eq!(n.tree().dead(), &set(&[2]), "{m:?}");
        assert!(events(&mut n).is_empty(), "{m:?}");
        let out = sent(&mut n);
        assert!(out.iter().all(|(to, _)| *to == Rank(1)), "{out:?}");
    }
}

#[test]
fn failover_notices_reach_every_survivor() {
    let config = Config::new(9, 2);
    let check = |net: &mut Net, dead: u32| {
        let mut model_dead = RankSet::new();
        model_dead.insert(Rank(dead));
        let ev = net.take_events_by_rank();
        let epoch = net.nodes().next().unwrap().1.epoch();
        assert!(epoch >= 1);
        for (r, n) in net.nodes() {
            let mut model = Tree::new(9, 2, r).unwrap();
            model.mark_dead(&[Rank(dead)], Scope::Global).unwrap();
            assert_eq!(n.tree().view(), model.view(), "at {r}");
            assert_eq!(n.tree().dead(), &model_dead, "at {r}");
            assert_eq!(n.tree().confirmed(), &model_dead, "at {r}");
            assert_eq!(n.epoch(), epoch, "at {r}");
            let got: Vec<&Event> = ev
                .get(&r)
                .into_iter()
                .flatten()
                .filter(|e| {
                    matches!(
                        e,
                        Event::Membership(MembershipEvent::FailureConfirmed { .. })
                    )
                })
                .collect();
            assert_eq!(got, [&confirmed_in(9, epoch, &[dead])], "at {r}");
            assert!(!n.has_output());
        }
        assert_eq!(net.lost(), 0);
    };

    // The inner rank 1 dies: the root adopts 5 into slot 1, 5 infers the death and adopts 3
    // in turn, and the root confirms it everywhere.
    let mut net = contract_net(&config, (0..9).filter(|&r| r != 1));
    net.node_mut(0)
        .handle_link_down(ms(1), Rank(1), LinkCause::Refused);
    net.run_until(ms(1_000));
    let adopts: Vec<(Rank, Rank)> = net
        .log()
        .iter()
        .filter(|f| f.frame[1] == Kind::Adopt.byte())
        .map(|f| (f.from, f.to))
        .collect();
    assert_eq!(adopts[..2], [(Rank(0), Rank(5)), (Rank(5), Rank(3))]);
    check(&mut net, 1);

    // The root dies: its children see the link go; 2 takes the root's slot, gathers what the
    // survivors hold, and confirms 0 dead everywhere. A broadcast afterwards still completes.
    let mut net = contract_net(&config, 1..9);
    net.node_mut(2)
        .handle_link_down(ms(1), Rank(0), LinkCause::Refused);
    net.node_mut(1)
        .handle_link_down(ms(1), Rank(0), LinkCause::Refused);
    net.run_until(ms(1_000));
    assert!(net.node(2).tree().view().unwrap().is_root());
    check(&mut net, 0);
    let seq = net
        .node_mut(8)
        .xcast(ms(1_000), 16, Bytes::from_static(b"after"))
        .unwrap();
    net.run_until(ms(2_000));
    let ev = net.take_events_by_rank();
    assert!(ev[&Rank(8)]
        .iter()
        .any(|e| matches!(e, Event::Xcast(XcastEvent::Completed { seq: s, .. }) if *s == seq)));
    for r in 1..9 {
        let got = ev[&Rank(r)]
            .iter()
            .filter(|e| matches!(e, Event::Xcast(XcastEvent::Delivered { origin, seq: s, .. }) if *origin == Rank(8) && *s == seq))
            .count();
        assert_eq!(got, 1, "at {r}");
    }
}

// ---------------------------------------------------------------------------------------------
// 4. Bounds
// ---------------------------------------------------------------------------------------------

#[test]
fn outbox_bounds_drop_and_count() {
    // Root of a radix-4 tree of 5: four children.
    let mut config = Config::new(5, 4);
    config.max_transmits = 2;
    let mut n = Node::new(config, Rank(0), 1, Instant::ZERO).unwrap();
    n.flood(ms(1), Bytes::from_static(b"q")).unwrap();
    let t = transmits(&mut n);
    assert_eq!(
        t.iter().map(|t| t.to).collect::<Vec<_>>(),
        [Rank(1), Rank(2)]
    );
    assert!(t.iter().all(|t| t.class == Class::Data));
    assert_eq!(n.stats().dropped_outbox_full, 2);
    assert_eq!(n.stats().frames_out, 2);
    // The bound is per drain: after draining, the next flood queues two again.
    n.flood(ms(2), Bytes::from_static(b"r")).unwrap();
    assert_eq!(transmits(&mut n).len(), 2);
    assert_eq!(n.stats().dropped_outbox_full, 4);
    assert_eq!(events(&mut n).len(), 2);

    // Events are bounded the same way.
    let mut config = Config::new(5, 4);
    config.max_events = 1;
    let mut n = Node::new(config, Rank(0), 1, Instant::ZERO).unwrap();
    n.flood(ms(1), Bytes::new()).unwrap();
    n.flood(ms(1), Bytes::new()).unwrap();
    assert_eq!(events(&mut n).len(), 1);
    assert_eq!(n.stats().dropped_events_full, 1);
    assert_eq!(transmits(&mut n).len(), 8);
}

#[test]
fn max_floods_forgets_the_oldest_id() {
    let mut config = Config::new(9, 2);
    config.flood.max = 2;
    let mut n = Node::new(config, Rank(0), 1, Instant::ZERO).unwrap();
    // Three floods from rank 4, arriving from child 2 and forwarded to child 1.
    for id in 1..=3 {
        n.handle_frame(ms(id), Rank(2), flood_frame(4, id, 2, b""));
        assert_eq!(events(&mut n), [delivered(4, id, 2, b"")]);
        let to: Vec<Rank> = transmits(&mut n).iter().map(|t| t.to).collect();
        assert_eq!(to, [Rank(1)]);
    }
    assert_eq!(n.stats().flood.forgotten, 1);
    assert_eq!(n.pending_state(), 1 + 2, "one sweep timer and two ids");
    // Id 1 was forgotten: it is new again (and in turn evicts id 2). Id 3 is remembered.
    n.handle_frame(ms(4), Rank(1), flood_frame(4, 3, 2, b""));
    assert!(events(&mut n).is_empty());
    assert_eq!(n.stats().flood.duplicates, 1);
    n.handle_frame(ms(5), Rank(1), flood_frame(4, 1, 2, b""));
    assert_eq!(events(&mut n), [delivered(4, 1, 2, b"")]);
    let to: Vec<Rank> = transmits(&mut n).iter().map(|t| t.to).collect();
    assert_eq!(to, [Rank(2)], "forwarded to the other child");
    assert_eq!(n.stats().flood.forgotten, 2);
    n.handle_frame(ms(6), Rank(1), flood_frame(4, 2, 2, b""));
    assert_eq!(
        events(&mut n).len(),
        1,
        "id 2 was evicted by the re-delivery of id 1"
    );
    transmits(&mut n);
    assert_eq!(n.pending_state(), 3);
    // The node's own floods share the bound.
    n.flood(ms(7), Bytes::new()).unwrap();
    assert_eq!(n.stats().flood.forgotten, 4);
    assert_eq!(n.pending_state(), 3);
    // The sweep still drains everything.
    n.handle_timeout(ms(7) + n.config().flood.linger);
    assert_eq!(n.pending_state(), 0);
}

#[test]
fn commands_refuse_misuse_without_changing_state() {
    let mut config = Config::new(9, 2);
    config.max_frame = MIN_FRAME;
    let mut n = Node::new(config, Rank(4), 1, Instant::ZERO).unwrap();
    // The largest payload that fits is accepted; one more byte is refused.
    let fits = MIN_FRAME as usize - 24;
    n.flood(ms(1), vec![0; fits].into()).unwrap();
    let t = transmits(&mut n);
    assert!(t.iter().all(|t| t.frame.len() == MIN_FRAME as usize));
    events(&mut n);
    let before = observe(&n);
    assert!(n.flood(ms(1), vec![0; fits + 1].into()).is_err());
    assert!(n.grow(ms(1), 8).is_err(), "shrinking");
    let out_of_span: RankSet = [Rank(9)].into_iter().collect();
    assert!(n.declare_dead(ms(1), &out_of_span).is_err());
    assert_eq!(observe(&n), before);

    // A rank told it is dead reports it, and refuses to flood.
    let me: RankSet = [Rank(4)].into_iter().collect();
    n.declare_dead(ms(2), &me).unwrap();
    match events(&mut n).as_slice() {
        [Event::ViewChanged(d)] => assert!(d.self_dead()),
        other => panic!("{other:?}"),
    }
    assert!(n.flood(ms(3), Bytes::new()).is_err());
    assert!(!n.has_output());
}

// ---------------------------------------------------------------------------------------------
// 5. Determinism
// ---------------------------------------------------------------------------------------------

/// Feeds a fixed script of every kind of input and records everything observable.
fn run_script(seed: u64) -> Vec<String> {
    let mut n = Node::new(Config::new(9, 2), Rank(1), seed, Instant::ZERO).unwrap();
    let mut log = Vec::new();
    let record = |n: &mut Node, log: &mut Vec<String>| {
        for t in transmits(n) {
            log.push(format!("{t:?}"));
        }
        for e in events(n) {
            log.push(format!("{e:?}"));
        }
        log.push(format!(
            "{:?} {:?} {}",
            n.poll_timeout(),
            n.now(),
            n.pending_state()
        ));
        log.push(format!("{:?}", n.stats()));
    };
    n.handle_link_up(ms(1), Rank(0));
    record(&mut n, &mut log);
    n.flood(ms(2), Bytes::from_static(b"one")).unwrap();
    record(&mut n, &mut log);
    n.handle_frame(ms(3), Rank(0), flood_frame(6, 4, 2, b"six"));
    record(&mut n, &mut log);
    n.handle_frame(ms(3), Rank(5), flood_frame(6, 4, 2, b"six"));
    record(&mut n, &mut log);
    n.handle_frame(ms(1), Rank(2), Bytes::from_static(&[1, 1, 0, 0, 0, 3, 9]));
    record(&mut n, &mut log);
    n.handle_timeout(ms(4));
    record(&mut n, &mut log);
    n.handle_link_down(ms(5), Rank(3), LinkCause::Refused);
    record(&mut n, &mut log);
    n.grow(ms(6), 12).unwrap();
    record(&mut n, &mut log);
    n.flood(ms(7), Bytes::from_static(b"two")).unwrap();
    record(&mut n, &mut log);
    n.declare_dead(ms(8), &[Rank(0)].into_iter().collect())
        .unwrap();
    record(&mut n, &mut log);
    n.handle_timeout(ms(60_000));
    record(&mut n, &mut log);
    for _ in 0..4 {
        log.push(format!("rand {}", n.random_u64()));
    }
    log
}

#[test]
fn same_seed_same_inputs_same_outputs() {
    let a = run_script(42);
    let b = run_script(42);
    assert_eq!(a, b);
    assert!(a.len() > 30, "{a:#?}");
    // The seed is really used: another seed changes the random draws, and only them.
    let c = run_script(43);
    assert_ne!(a, c);
    let strip = |v: &[String]| -> Vec<String> {
        v.iter()
            .filter(|l| !l.starts_with("rand "))
            .cloned()
            .collect()
    };
    assert_eq!(strip(&a), strip(&c));
}

// ---------------------------------------------------------------------------------------------
// 6. Xcast commands
// ---------------------------------------------------------------------------------------------

#[test]
fn xcast_commands_refuse_misuse_without_changing_state() {
    // Rank 4 of the 9-rank tree: parent 2, child 8.
    let mut n = node(9, 2, 4);
    let reserved = std::iter::once(xcast::TAG_FAILURE_NOTICE).chain(2..xcast::FIRST_APP_TAG);
    for tag in reserved {
        let before = observe(&n);
        assert_eq!(
            n.xcast(ms(1), tag, Bytes::from_static(b"x")),
            Err(CommandError::Xcast(XcastError::ReservedTag(tag)))
        );
        let mut want = before;
        want.now = ms(1);
        assert_eq!(observe(&n), want, "tag {tag}");
    }
    assert!(!n.has_output());
    for (seq, tag) in (1..).zip([xcast::TAG_WIREUP, xcast::FIRST_APP_TAG, u16::MAX]) {
        assert_eq!(n.xcast(ms(2), tag, Bytes::from_static(b"x")), Ok(seq));
        let relay = Message::Xcast(XcastMsg::Relay(RelayMsg {
            origin: Rank(4),
            seq,
            numbered: 0,
            tag,
            payload: Bytes::from_static(b"x"),
        }));
        assert_eq!(sent(&mut n), [(Rank(2), relay)], "tag {tag}");
    }

    // Too large: the largest payload accepted fits a frame on every hop it will take (the
    // relay, each forward, a recovery report); one byte more is refused.
    let mut config = Config::new(9, 2);
    config.max_frame = MIN_FRAME;
    let try_len = |len: usize| {
        let mut n = Node::new(config.clone(), Rank(4), 1, Instant::ZERO).unwrap();
        let r = n.xcast(ms(1), 16, vec![7; len].into());
        (r, n)
    };
    let (mut lo, mut hi) = (0usize, MIN_FRAME as usize);
    assert!(try_len(lo).0.is_ok());
    assert!(try_len(hi).0.is_err());
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        if try_len(mid).0.is_ok() {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    assert!(lo >= MIN_FRAME as usize / 2, "only {lo} bytes fit");
    let (r, n) = try_len(lo + 1);
    assert_eq!(
        r,
        Err(CommandError::TooLarge {
            len: lo + 1,
            max: MIN_FRAME
        })
    );
    assert!(!n.has_output() && n.pending_state() == 0);
    let (r, mut n) = try_len(lo);
    assert_eq!(r, Ok(1));
    let t = transmits(&mut n);
    assert!(t.len() == 1 && t[0].frame.len() <= MIN_FRAME as usize);
    let payload = Bytes::from(vec![7; lo]);
    let fwd = Message::Xcast(XcastMsg::Forward(ForwardMsg {
        op: 1,
        round: 1,
        done: 0,
        global_done: 0,
        origin: Rank(4),
        seq: 1,
        tag: 16,
        payload: payload.clone(),
    }));
    let rec = Message::Xcast(XcastMsg::RecoveredOp(RecoveredOpMsg {
        gen: 1,
        op: 1,
        origin: Rank(4),
        seq: 1,
        tag: 16,
        payload,
    }));
    assert!(fwd.frame_len() <= MIN_FRAME as usize);
    assert!(rec.frame_len() <= MIN_FRAME as usize);

    // Backpressure at xcast_max_inflight broadcasts awaiting completion.
    let mut config = Config::new(9, 2);
    config.xcast.max_inflight = 2;
    let mut n = Node::new(config, Rank(4), 1, Instant::ZERO).unwrap();
    assert_eq!(n.xcast(ms(1), 16, Bytes::from_static(b"a")), Ok(1));
    assert_eq!(n.xcast(ms(1), 16, Bytes::from_static(b"bc")), Ok(2));
    transmits(&mut n);
    let before = observe(&n);
    assert_eq!(
        n.xcast(ms(2), 16, Bytes::from_static(b"d")),
        Err(CommandError::Xcast(XcastError::Backpressure {
            ops: 2,
            bytes: 3
        }))
    );
    let mut want = before;
    want.now = ms(2);
    assert_eq!(observe(&n), want);

    // ... and at xcast_max_bytes payload bytes.
    let mut config = Config::new(9, 2);
    config.xcast.max_bytes = 10;
    let mut n = Node::new(config, Rank(4), 1, Instant::ZERO).unwrap();
    assert_eq!(n.xcast(ms(1), 16, vec![0; 6].into()), Ok(1));
    assert_eq!(
        n.xcast(ms(1), 16, vec![0; 5].into()),
        Err(CommandError::Xcast(XcastError::Backpressure {
            ops: 1,
            bytes: 6
        }))
    );
    assert_eq!(n.xcast(ms(1), 16, vec![0; 4].into()), Ok(2));
    assert_eq!(
        n.xcast(ms(1), 16, vec![0; 1].into()),
        Err(CommandError::Xcast(XcastError::Backpressure {
            ops: 2,
            bytes: 10
        }))
    );
    assert_eq!(
        n.xcast(ms(1), 16, Bytes::new()),
        Ok(3),
        "an empty payload still fits"
    );

    // A dead rank takes no broadcast.
    let mut n = node(9, 2, 4);
    n.declare_dead(ms(1), &set(&[4])).unwrap();
    events(&mut n);
    transmits(&mut n);
    assert_eq!(
        n.xcast(ms(2), 16, Bytes::from_static(b"x")),
        Err(CommandError::Dead)
    );
    assert!(!n.has_output());
}

#[test]
fn xcast_completes_and_backpressure_releases() {
    let mut config = Config::new(9, 2);
    config.xcast.max_inflight = 1;
    let mut net = contract_net(&config, 0..9);
    let payload = Bytes::from_static(b"hello");
    assert_eq!(net.node_mut(8).xcast(ms(0), 16, payload.clone()), Ok(1));
    assert_eq!(
        net.node_mut(8).xcast(ms(0), 16, payload.clone()),
        Err(CommandError::Xcast(XcastError::Backpressure {
            ops: 1,
            bytes: 5
        }))
    );
    net.run_until(ms(1_000));
    let ev = net.take_events_by_rank();
    let mut ops = BTreeSet::new();
    for r in (0..9).map(Rank) {
        let got: Vec<u64> = ev[&r]
            .iter()
            .filter_map(|e| match e {
                Event::Xcast(XcastEvent::Delivered {
                    op,
                    origin,
                    seq: 1,
                    tag: 16,
                    payload: p,
                }) if *origin == Rank(8) && *p == payload => Some(*op),
                _ => None,
            })
            .collect();
        assert_eq!(got.len(), 1, "at {r}");
        ops.insert(got[0]);
    }
    assert_eq!(ops.len(), 1, "one op id everywhere");
    let op = ops.into_iter().next().unwrap();
    assert!(ev[&Rank(8)].contains(&Event::Xcast(XcastEvent::Completed { op, seq: 1 })));
    assert!(
        ev[&Rank(0)].contains(&Event::Xcast(XcastEvent::RootCompleted {
            op,
            origin: Rank(8),
            seq: 1
        }))
    );
    assert_eq!(net.node_mut(8).xcast(ms(1_000), 16, payload), Ok(2));
}
