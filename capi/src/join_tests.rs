//! Unit tests of `join.rs`: a whole join through the C entry points (one member, one joiner),
//! and every error path: NULL pointers, short buffers, malformed bytes, calls out of order.
//! Each answers its code; none panics.

use super::*;
use crate::config::{lifeline_config_free, lifeline_config_new, lifeline_config_set};
use crate::event::{Event, LIFELINE_EVENT_JOINED};
use crate::node::{
    lifeline_node_free, lifeline_node_handle_timeout, lifeline_node_new, lifeline_node_poll_event,
    lifeline_node_poll_timeout, lifeline_node_poll_transmit, Transmit,
};
use crate::query::lifeline_node_stats;
use crate::stats::Stats;
use std::ptr::{null, null_mut};

const MS: u64 = 1_000_000;

fn config(span: u32, radix: u32) -> *mut Config {
    let c = lifeline_config_new(span, radix);
    // SAFETY: a live config and a NUL-terminated key.
    let r = unsafe { lifeline_config_set(c, c"join_batch_ns".as_ptr(), MS) };
    assert_eq!(r, LIFELINE_OK);
    c
}

fn node(span: u32, me: u32) -> *mut Node {
    let c = config(span, 2);
    let mut n = null_mut();
    // SAFETY: a live config and a writable out-pointer.
    unsafe {
        assert_eq!(lifeline_node_new(c, me, 1, 0, &mut n), LIFELINE_OK);
        lifeline_config_free(c);
    }
    n
}

fn joiner(contacts: u32, seed: u64) -> *mut Joiner {
    let mut j = null_mut();
    // SAFETY: a readable address and a writable out-pointer.
    let r = unsafe { lifeline_joiner_new(contacts, b"j:1".as_ptr(), 3, null(), seed, 0, &mut j) };
    assert_eq!(r, LIFELINE_OK);
    j
}

/// The joiner's next request: (contact, nonce, seq, bytes).
fn request(j: *mut Joiner) -> Option<(u32, u64, u32, Vec<u8>)> {
    let mut buf = vec![0u8; LIFELINE_MAX_JOIN_MSG];
    let mut t = JoinTransmit::default();
    // SAFETY: a live joiner, `buf` of its length, a writable descriptor.
    match unsafe { lifeline_joiner_poll_transmit(j, buf.as_mut_ptr(), buf.len(), &mut t) } {
        LIFELINE_OK => Some((t.contact, t.nonce, t.seq, buf[..t.len].to_vec())),
        r => {
            assert_eq!(r, LIFELINE_DONE);
            None
        }
    }
}

/// The node's next join reply: (conn id, bytes).
fn reply(n: *mut Node) -> Option<(u64, Vec<u8>)> {
    let mut buf = vec![0u8; LIFELINE_MAX_JOIN_MSG];
    let (mut conn, mut len) = (0, 0);
    // SAFETY: a live node, `buf` of its length, writable outputs.
    match unsafe {
        lifeline_node_poll_join_reply(n, &mut conn, buf.as_mut_ptr(), buf.len(), &mut len)
    } {
        LIFELINE_OK => Some((conn, buf[..len].to_vec())),
        r => {
            assert_eq!(r, LIFELINE_DONE);
            None
        }
    }
}

/// Drains a lone node's transmits (none go anywhere) and events; returns the events' kinds and
/// the `JOINED` events' (epoch, members, joiners' ranks).
fn drain(n: *mut Node) -> Vec<(u32, u64, u64, Vec<u32>)> {
    let mut buf = vec![0u8; 1 << 20];
    let mut t = Transmit::default();
    // SAFETY: a live node, `buf` of its length, a writable descriptor.
    while unsafe { lifeline_node_poll_transmit(n, buf.as_mut_ptr(), buf.len(), &mut t) }
        == LIFELINE_OK
    {}
    let mut out = Vec::new();
    let mut ev: *const Event = null();
    // SAFETY: a live node and a writable pointer; the event is read before the next call.
    while unsafe { lifeline_node_poll_event(n, &mut ev) } == LIFELINE_OK {
        // SAFETY: `ev` points to the node's current event, and its `joiners` to `joiners_len`
        // elements.
        let e = unsafe { &*ev };
        let ranks = if e.joiners_len == 0 {
            Vec::new()
        } else {
            // SAFETY: as above.
            unsafe { std::slice::from_raw_parts(e.joiners, e.joiners_len) }
                .iter()
                .map(|a| a.rank)
                .collect()
        };
        out.push((e.kind, e.epoch, e.count, ranks));
    }
    out
}

fn joiner_events(j: *mut Joiner) -> Vec<JoinerEvent> {
    let mut v = Vec::new();
    let mut ev: *const JoinerEvent = null();
    // SAFETY: a live joiner and a writable pointer; the event is copied before the next call.
    while unsafe { lifeline_joiner_poll_event(j, &mut ev) } == LIFELINE_OK {
        // SAFETY: `ev` points to the joiner's current event.
        v.push(unsafe { *ev });
    }
    v
}

fn stats(n: *mut Node) -> Stats {
    let mut s = Stats::default();
    // SAFETY: a live node and a writable struct of that size.
    let r = unsafe { lifeline_node_stats(n, &mut s, std::mem::size_of::<Stats>()) };
    assert_eq!(r, LIFELINE_OK);
    s
}

/// A one-member cluster admits a joiner through the C entry points: the request, the member's
/// `JOINED` event, the reply (also through a too-short buffer first), the joiner's `ADMITTED`
/// event, and its node from the admission.
#[test]
fn a_joiner_is_admitted_through_the_c_api() {
    let m = node(1, 0);
    drain(m);
    let j = joiner(1, 42);
    let (contact, nonce, seq, bytes) = request(j).unwrap();
    assert_eq!((contact, seq), (0, 1));
    assert!(request(j).is_none());
    // SAFETY: live handles and readable bytes.
    unsafe {
        assert_eq!(
            lifeline_node_handle_join_request(m, MS, 7, bytes.as_ptr(), bytes.len()),
            LIFELINE_OK
        );
    }
    let mut now = MS;
    let mut joined = Vec::new();
    for _ in 0..100 {
        joined.extend(drain(m));
        // SAFETY: a live node.
        let at = unsafe { lifeline_node_poll_timeout(m) };
        if at == LIFELINE_NEVER || !joined.is_empty() {
            break;
        }
        now = now.max(at);
        // SAFETY: a live node.
        assert_eq!(unsafe { lifeline_node_handle_timeout(m, now) }, LIFELINE_OK);
    }
    let j_ev: Vec<_> = joined
        .iter()
        .filter(|e| e.0 == LIFELINE_EVENT_JOINED)
        .collect();
    assert_eq!(j_ev.len(), 1, "{joined:?}");
    assert_eq!((j_ev[0].2, &j_ev[0].3), (2, &vec![1]));
    let epoch = j_ev[0].1;
    assert!(epoch >= 1);

    // The reply: a size query first (it stays queued), then the bytes.
    let (mut conn, mut len) = (0, 0);
    // SAFETY: a live node; NULL `buf` with `cap` 0 is a size query.
    unsafe {
        assert_eq!(
            lifeline_node_poll_join_reply(m, &mut conn, null_mut(), 0, &mut len),
            LIFELINE_ERR_BUFFER_TOO_SHORT
        );
    }
    assert_eq!(conn, 7);
    assert!(len > 0);
    let mut small = vec![0u8; len - 1];
    // SAFETY: `small` has `len - 1` writable bytes.
    unsafe {
        assert_eq!(
            lifeline_node_poll_join_reply(m, &mut conn, small.as_mut_ptr(), len - 1, &mut len),
            LIFELINE_ERR_BUFFER_TOO_SHORT
        );
    }
    let (c, answer) = reply(m).unwrap();
    assert_eq!((c, answer.len()), (7, len));
    assert!(reply(m).is_none());
    let s = stats(m);
    assert_eq!(
        (
            s.join_requests_in,
            s.joins_admitted,
            s.join_views,
            s.join_accepts_sent
        ),
        (1, 1, 1, 1)
    );

    // Building the node before the joiner reported its admission is refused.
    let c = config(1, 2);
    let mut jn = null_mut::<Node>();
    // SAFETY: live handles and a writable out-pointer.
    unsafe {
        assert_eq!(
            lifeline_node_new_from_admission(c, j, 5, now, &mut jn),
            LIFELINE_ERR_INVALID_ARGUMENT
        );
        assert!(jn.is_null());
        assert_eq!(
            lifeline_joiner_handle_reply(j, now, 0, answer.as_ptr(), answer.len()),
            LIFELINE_OK
        );
    }
    let evs = joiner_events(j);
    assert_eq!(evs.len(), 1);
    assert_eq!(
        (evs[0].kind, evs[0].rank, evs[0].epoch, evs[0].span),
        (LIFELINE_JOINER_EVENT_ADMITTED, 1, epoch, 2)
    );
    assert_eq!((evs[0].nonce, evs[0].seq), (nonce, 1));
    // SAFETY: a live joiner.
    assert_eq!(unsafe { lifeline_joiner_poll_timeout(j) }, LIFELINE_NEVER);
    // Another radix than the cluster's is refused; the cluster's builds rank 1 at the epoch.
    let c3 = config(1, 3);
    // SAFETY: live handles and writable out-pointers.
    unsafe {
        assert_eq!(
            lifeline_node_new_from_admission(c3, j, 5, now, &mut jn),
            LIFELINE_ERR_INVALID_CONFIG
        );
        assert!(jn.is_null());
        assert_eq!(
            lifeline_node_new_from_admission(c, j, 5, now, &mut jn),
            LIFELINE_OK
        );
        lifeline_config_free(c3);
        lifeline_config_free(c);
        lifeline_joiner_free(j);
        let mut ep = 0;
        let mut members = 0;
        assert_eq!(
            crate::query::lifeline_node_view(jn, &mut ep, &mut members),
            LIFELINE_OK
        );
        assert_eq!((ep, members), (epoch, 2));
        lifeline_node_free(jn);
        lifeline_node_free(m);
    }
}

#[test]
fn null_pointers_are_errors() {
    let n = node(2, 0);
    let j = joiner(2, 1);
    let mut buf = [0u8; 8];
    let (mut conn, mut len) = (0u64, 0usize);
    let mut t = JoinTransmit::default();
    let mut ev: *const JoinerEvent = null();
    let mut counters = JoinerStats::default();
    let c = config(2, 2);
    let mut out_node = std::ptr::dangling_mut::<Node>();
    let mut out_joiner = std::ptr::dangling_mut::<Joiner>();
    // SAFETY: every pointer is NULL or valid for what the function does with it.
    unsafe {
        // Member side.
        assert_eq!(
            lifeline_node_handle_join_request(null_mut(), 0, 1, buf.as_ptr(), 1),
            LIFELINE_ERR_NULL
        );
        assert_eq!(
            lifeline_node_handle_join_request(n, 0, 1, null(), 4),
            LIFELINE_ERR_NULL
        );
        assert_eq!(
            lifeline_node_handle_join_conn_closed(null_mut(), 0, 1),
            LIFELINE_ERR_NULL
        );
        assert_eq!(
            lifeline_node_poll_join_reply(null_mut(), &mut conn, buf.as_mut_ptr(), 8, &mut len),
            LIFELINE_ERR_NULL
        );
        assert_eq!(
            lifeline_node_poll_join_reply(n, null_mut(), buf.as_mut_ptr(), 8, &mut len),
            LIFELINE_ERR_NULL
        );
        assert_eq!(
            lifeline_node_poll_join_reply(n, &mut conn, buf.as_mut_ptr(), 8, null_mut()),
            LIFELINE_ERR_NULL
        );
        assert_eq!(
            lifeline_node_poll_join_reply(n, &mut conn, null_mut(), 8, &mut len),
            LIFELINE_ERR_NULL
        );
        // Nothing queued: a NULL buffer with cap 0 is fine.
        assert_eq!(
            lifeline_node_poll_join_reply(n, &mut conn, null_mut(), 0, &mut len),
            LIFELINE_DONE
        );
        // Joiner side.
        assert_eq!(
            lifeline_joiner_config_default(null_mut()),
            LIFELINE_ERR_NULL
        );
        assert_eq!(
            lifeline_joiner_new(1, buf.as_ptr(), 1, null(), 1, 0, null_mut()),
            LIFELINE_ERR_NULL
        );
        assert_eq!(
            lifeline_joiner_new(1, null(), 3, null(), 1, 0, &mut out_joiner),
            LIFELINE_ERR_NULL
        );
        assert!(out_joiner.is_null(), "*out is NULL on an error");
        assert_eq!(
            lifeline_joiner_poll_transmit(null_mut(), buf.as_mut_ptr(), 8, &mut t),
            LIFELINE_ERR_NULL
        );
        assert_eq!(
            lifeline_joiner_poll_transmit(j, buf.as_mut_ptr(), 8, null_mut()),
            LIFELINE_ERR_NULL
        );
        assert_eq!(
            lifeline_joiner_poll_transmit(j, null_mut(), 8, &mut t),
            LIFELINE_ERR_NULL
        );
        assert_eq!(
            lifeline_joiner_handle_reply(null_mut(), 0, 0, buf.as_ptr(), 1),
            LIFELINE_ERR_NULL
        );
        assert_eq!(
            lifeline_joiner_handle_reply(j, 0, 0, null(), 1),
            LIFELINE_ERR_NULL
        );
        assert_eq!(
            lifeline_joiner_handle_contact_failed(null_mut(), 0, 0, 1, 1),
            LIFELINE_ERR_NULL
        );
        assert_eq!(
            lifeline_joiner_handle_timeout(null_mut(), 0),
            LIFELINE_ERR_NULL
        );
        assert_eq!(lifeline_joiner_poll_timeout(null()), LIFELINE_NEVER);
        assert_eq!(
            lifeline_joiner_poll_event(null_mut(), &mut ev),
            LIFELINE_ERR_NULL
        );
        assert!(ev.is_null());
        assert_eq!(lifeline_joiner_poll_event(j, null_mut()), LIFELINE_ERR_NULL);
        assert_eq!(
            lifeline_joiner_stats(null(), &mut counters, std::mem::size_of::<JoinerStats>()),
            LIFELINE_ERR_NULL
        );
        assert_eq!(lifeline_joiner_stats(j, null_mut(), 8), LIFELINE_ERR_NULL);
        assert_eq!(
            lifeline_node_new_from_admission(null(), j, 1, 0, &mut out_node),
            LIFELINE_ERR_NULL
        );
        assert!(out_node.is_null(), "*out is NULL on an error");
        assert_eq!(
            lifeline_node_new_from_admission(c, null(), 1, 0, &mut out_node),
            LIFELINE_ERR_NULL
        );
        assert_eq!(
            lifeline_node_new_from_admission(c, j, 1, 0, null_mut()),
            LIFELINE_ERR_NULL
        );
        lifeline_joiner_free(null_mut());
        lifeline_config_free(c);
        lifeline_joiner_free(j);
        lifeline_node_free(n);
    }
}

#[test]
fn joiner_arguments_and_tuning_are_checked() {
    let mut j = std::ptr::dangling_mut::<Joiner>();
    let long = [b'a'; LIFELINE_MAX_JOIN_ADDR + 1];
    let mut d = JoinerConfig::default();
    // SAFETY: readable inputs and writable outputs.
    unsafe {
        assert_eq!(lifeline_joiner_config_default(&mut d), LIFELINE_OK);
        assert_eq!(
            (
                d.retry_min_ns,
                d.retry_max_ns,
                d.attempt_timeout_ns,
                d.max_span
            ),
            (50 * MS, 2_000 * MS, 15_000 * MS, 1 << 24)
        );
        assert_eq!(
            lifeline_joiner_new(0, b"x".as_ptr(), 1, null(), 1, 0, &mut j),
            LIFELINE_ERR_INVALID_ARGUMENT
        );
        assert!(j.is_null());
        assert_eq!(
            lifeline_joiner_new(1, long.as_ptr(), long.len(), null(), 1, 0, &mut j),
            LIFELINE_ERR_INVALID_ARGUMENT
        );
        for bad in [
            JoinerConfig {
                retry_min_ns: 0,
                ..d
            },
            JoinerConfig {
                retry_min_ns: d.retry_max_ns + 1,
                ..d
            },
            JoinerConfig {
                attempt_timeout_ns: 0,
                ..d
            },
        ] {
            assert_eq!(
                lifeline_joiner_new(1, b"x".as_ptr(), 1, &bad, 1, 0, &mut j),
                LIFELINE_ERR_INVALID_CONFIG,
                "{bad:?}"
            );
            assert!(j.is_null());
        }
        // The longest address, and an empty one (NULL), are fine; the tuning is used: a try
        // with no answer fails after `attempt_timeout_ns`.
        let quick = JoinerConfig {
            attempt_timeout_ns: 3 * MS,
            ..d
        };
        assert_eq!(
            lifeline_joiner_new(
                2,
                long.as_ptr(),
                LIFELINE_MAX_JOIN_ADDR,
                &quick,
                1,
                0,
                &mut j
            ),
            LIFELINE_OK
        );
        assert_eq!(lifeline_joiner_poll_timeout(j), 3 * MS);
        lifeline_joiner_free(j);
        assert_eq!(
            lifeline_joiner_new(2, null(), 0, null(), 1, 0, &mut j),
            LIFELINE_OK
        );
        lifeline_joiner_free(j);
    }
}

/// A request that does not fit stays queued, with its size; a retry rotates contacts and
/// keeps the nonce; a failed connection of an older try is ignored.
#[test]
fn joiner_short_buffers_and_retries() {
    let j = joiner(3, 4); // first contact: 4 % 3 = 1
    let mut t = JoinTransmit::default();
    let mut small = [0u8; 4];
    // SAFETY: a live joiner; NULL `buf` with `cap` 0, then 4 writable bytes.
    unsafe {
        assert_eq!(
            lifeline_joiner_poll_transmit(j, null_mut(), 0, &mut t),
            LIFELINE_ERR_BUFFER_TOO_SHORT
        );
        let need = t.len;
        assert!(need > 4);
        assert_eq!(
            lifeline_joiner_poll_transmit(j, small.as_mut_ptr(), 4, &mut t),
            LIFELINE_ERR_BUFFER_TOO_SHORT
        );
        assert_eq!(t.len, need);
    }
    let (contact, nonce, seq, bytes) = request(j).unwrap();
    assert_eq!((contact, seq, bytes.len()), (1, 1, t.len));
    assert_eq!(&bytes[..4], b"LLJ1");
    assert!(request(j).is_none());
    // SAFETY: a live joiner.
    unsafe {
        // Another try's failure: ignored.
        assert_eq!(
            lifeline_joiner_handle_contact_failed(j, MS, 1, nonce, 9),
            LIFELINE_OK
        );
        assert!(joiner_events(j).is_empty());
        assert_eq!(
            lifeline_joiner_handle_contact_failed(j, MS, 1, nonce, 1),
            LIFELINE_OK
        );
    }
    let evs = joiner_events(j);
    assert_eq!(evs.len(), 1);
    let e = evs[0];
    assert_eq!(
        (e.kind, e.reason, e.next_contact, e.rank, e.nonce, e.seq),
        (
            LIFELINE_JOINER_EVENT_RETRYING,
            LIFELINE_JOIN_RETRY_CONTACT_FAILED,
            2,
            crate::LIFELINE_NO_RANK,
            nonce,
            1
        )
    );
    assert!(e.after_ns > 0);
    // SAFETY: a live joiner.
    let at = unsafe { lifeline_joiner_poll_timeout(j) };
    assert_eq!(at, MS + e.after_ns);
    // SAFETY: a live joiner.
    let r = unsafe { lifeline_joiner_handle_timeout(j, at) };
    assert_eq!(r, LIFELINE_OK);
    let (contact, nonce2, seq, _) = request(j).unwrap();
    assert_eq!((contact, nonce2, seq), (2, nonce, 2));
    let mut s = JoinerStats::default();
    // SAFETY: a live joiner; `s` is writable for its size (and 8 bytes are fewer).
    unsafe {
        assert_eq!(lifeline_joiner_stats(j, &mut s, 8), LIFELINE_OK);
        assert_eq!(
            s,
            JoinerStats {
                tries: 2,
                ..JoinerStats::default()
            }
        );
        assert_eq!(
            lifeline_joiner_stats(j, &mut s, std::mem::size_of::<JoinerStats>()),
            LIFELINE_OK
        );
        lifeline_joiner_free(j);
    }
}

/// Malformed bytes on either side are `LIFELINE_ERR_MALFORMED`, counted, and change nothing;
/// random and mutated bytes never panic (or poison a handle).
#[test]
fn malformed_bytes_are_errors_never_panics() {
    let n = node(3, 1);
    drain(n);
    let j = joiner(1, 3);
    let (_, _, _, good) = request(j).unwrap();
    // SAFETY: live handles and readable bytes (NULL only with length 0).
    unsafe {
        assert_eq!(
            lifeline_node_handle_join_request(n, MS, 1, null(), 0),
            LIFELINE_ERR_MALFORMED
        );
        assert_eq!(
            lifeline_node_handle_join_request(n, MS, 1, b"junk".as_ptr(), 4),
            LIFELINE_ERR_MALFORMED
        );
        // A valid request with a byte more or a byte less.
        let mut longer = good.clone();
        longer.push(0);
        assert_eq!(
            lifeline_node_handle_join_request(n, MS, 1, longer.as_ptr(), longer.len()),
            LIFELINE_ERR_MALFORMED
        );
        assert_eq!(
            lifeline_node_handle_join_request(n, MS, 1, good.as_ptr(), good.len() - 1),
            LIFELINE_ERR_MALFORMED
        );
        // A request is not a reply, and junk is neither.
        assert_eq!(
            lifeline_joiner_handle_reply(j, MS, 0, good.as_ptr(), good.len()),
            LIFELINE_ERR_MALFORMED
        );
        assert_eq!(
            lifeline_joiner_handle_reply(j, MS, 0, null(), 0),
            LIFELINE_ERR_MALFORMED
        );
    }
    assert_eq!(stats(n).join_requests_malformed, 4);
    assert_eq!(stats(n).join_requests_in, 0);
    let mut s = JoinerStats::default();
    // SAFETY: a live joiner and a writable struct.
    unsafe { lifeline_joiner_stats(j, &mut s, std::mem::size_of::<JoinerStats>()) };
    assert_eq!(s.malformed_replies, 2);
    assert!(
        joiner_events(j).is_empty(),
        "a malformed reply changes nothing"
    );

    // Fuzz: random bytes, and the valid request with a few bytes flipped.
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for i in 0..4000u64 {
        let mut b = if i % 2 == 0 {
            let len = (rnd() % 64) as usize;
            (0..len).map(|_| rnd() as u8).collect::<Vec<u8>>()
        } else {
            good.clone()
        };
        if !b.is_empty() {
            for _ in 0..=(rnd() % 3) {
                let k = (rnd() as usize) % b.len();
                b[k] ^= rnd() as u8 | 1;
            }
        }
        // SAFETY: live handles and `b.len()` readable bytes.
        let (r1, r2) = unsafe {
            (
                lifeline_node_handle_join_request(n, MS, 100 + i, b.as_ptr(), b.len()),
                lifeline_joiner_handle_reply(j, MS, 0, b.as_ptr(), b.len()),
            )
        };
        assert!(matches!(r1, LIFELINE_OK | LIFELINE_ERR_MALFORMED), "{r1:?}");
        assert!(matches!(r2, LIFELINE_OK | LIFELINE_ERR_MALFORMED), "{r2:?}");
        // A flipped address byte may still decode: those are real requests (forwarded).
        drain(n);
        while reply(n).is_some() {}
    }
    // SAFETY: live handles, used by this thread only; freed once.
    unsafe {
        assert_eq!(lifeline_node_handle_timeout(n, 2 * MS), LIFELINE_OK);
        assert_eq!(lifeline_joiner_handle_timeout(j, 2 * MS), LIFELINE_OK);
        lifeline_joiner_free(j);
        lifeline_node_free(n);
    }
}

/// A full contact answers "busy" at once (to the connection the request came on, through a
/// short buffer first); a closed connection's waiting request is forgotten: it gets no answer,
/// not even "timed out", and frees its place.
#[test]
fn busy_answers_and_closed_connections() {
    let c = config(3, 2);
    let mut n = null_mut();
    // SAFETY: a live config, NUL-terminated keys and writable out-pointers.
    unsafe {
        assert_eq!(
            lifeline_config_set(c, c"join_max_pending".as_ptr(), 1),
            LIFELINE_OK
        );
        assert_eq!(
            lifeline_config_set(c, c"join_timeout_ns".as_ptr(), 10 * MS),
            LIFELINE_OK
        );
        assert_eq!(lifeline_node_new(c, 1, 1, 0, &mut n), LIFELINE_OK);
        lifeline_config_free(c);
    }
    drain(n);
    let (a, b) = (joiner(1, 10), joiner(1, 11));
    let (_, _, _, ra) = request(a).unwrap();
    let (_, nb, _, rb) = request(b).unwrap();
    let mut len = 0;
    let mut conn = 0;
    // SAFETY: live handles, readable bytes and writable outputs.
    unsafe {
        // Rank 1 is not the coordinator: the first request waits (forwarded), the second
        // finds the contact full.
        assert_eq!(
            lifeline_node_handle_join_request(n, MS, 1, ra.as_ptr(), ra.len()),
            LIFELINE_OK
        );
        assert_eq!(
            lifeline_node_handle_join_request(n, MS, 2, rb.as_ptr(), rb.len()),
            LIFELINE_OK
        );
        drain(n);
        assert_eq!(
            lifeline_node_poll_join_reply(n, &mut conn, null_mut(), 0, &mut len),
            LIFELINE_ERR_BUFFER_TOO_SHORT
        );
        assert_eq!(conn, 2);
        let (c2, busy) = reply(n).unwrap();
        assert_eq!((c2, busy.len()), (2, len));
        assert!(reply(n).is_none());
        assert_eq!(
            lifeline_joiner_handle_reply(b, MS, 0, busy.as_ptr(), busy.len()),
            LIFELINE_OK
        );
        let e = joiner_events(b);
        assert_eq!(
            (e.len(), e[0].kind, e[0].reason, e[0].nonce),
            (
                1,
                LIFELINE_JOINER_EVENT_RETRYING,
                LIFELINE_JOIN_RETRY_BUSY,
                nb
            )
        );
        // Connection 1 closes: its request is forgotten, so the second joiner's next try
        // (connection 3) finds room and waits.
        assert_eq!(lifeline_node_handle_join_conn_closed(n, MS, 1), LIFELINE_OK);
        assert_eq!(
            lifeline_node_handle_join_request(n, 2 * MS, 3, rb.as_ptr(), rb.len()),
            LIFELINE_OK
        );
        drain(n);
        assert!(reply(n).is_none());
        // Past the join timeout only connection 3 is answered ("retry": timed out).
        let mut now = 2 * MS;
        while now < 40 * MS {
            now = lifeline_node_poll_timeout(n).clamp(now + MS, 40 * MS);
            assert_eq!(lifeline_node_handle_timeout(n, now), LIFELINE_OK);
            drain(n);
        }
        let answers: Vec<u64> = std::iter::from_fn(|| reply(n)).map(|(c, _)| c).collect();
        assert_eq!(answers, [3]);
        let s = stats(n);
        assert_eq!((s.join_retries_sent, s.joins_timed_out), (2, 1));
        lifeline_joiner_free(a);
        lifeline_joiner_free(b);
        lifeline_node_free(n);
    }
}

/// A panic inside a joiner entry point (simulated: the core promises none) is answered
/// `LIFELINE_ERR_PANIC` and poisons that joiner only: every later call answers the same, and a
/// node cannot be built from it.
#[test]
fn a_panic_poisons_the_joiner() {
    let (j, k) = (joiner(1, 1), joiner(1, 2));
    let prev = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {})); // keep the expected panic out of the output
                                            // SAFETY: `j` is a live joiner used by this thread only.
    let r = enter(
        unsafe { j.as_mut() },
        LIFELINE_ERR_NULL,
        LIFELINE_ERR_PANIC,
        |_| panic!("a bug"),
    );
    std::panic::set_hook(prev);
    assert_eq!(r, LIFELINE_ERR_PANIC);
    let c = config(1, 2);
    let mut n = null_mut();
    let mut t = JoinTransmit::default();
    let mut buf = [0u8; 64];
    // SAFETY: live handles used by this thread only; freed once.
    unsafe {
        assert_eq!(
            lifeline_joiner_poll_transmit(j, buf.as_mut_ptr(), 64, &mut t),
            LIFELINE_ERR_PANIC
        );
        assert_eq!(lifeline_joiner_handle_timeout(j, 1), LIFELINE_ERR_PANIC);
        assert_eq!(lifeline_joiner_poll_timeout(j), LIFELINE_NEVER);
        assert_eq!(
            lifeline_node_new_from_admission(c, j, 1, 1, &mut n),
            LIFELINE_ERR_PANIC
        );
        assert!(n.is_null());
        assert_eq!(
            lifeline_joiner_poll_transmit(k, buf.as_mut_ptr(), 64, &mut t),
            LIFELINE_OK
        );
        lifeline_config_free(c);
        lifeline_joiner_free(j);
        lifeline_joiner_free(k);
    }
}
