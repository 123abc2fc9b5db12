//! Loopback RC ping-pong on a real RDMA device through the channel machine.
//!
//! Where there is no device, no ACTIVE port or no verbs support in the kernel, it prints
//! `skipped: no RDMA device (...)` and passes, unless `LIFELINE_REQUIRE_RDMA=1`, which turns
//! that into a failure (set it on machines that do have RDMA).

use std::time::{Duration, Instant as Wall};

use bytes::Bytes;
use lifeline_core::Instant;
use lifeline_transport_rdma::channel::{Buffers, Channel, ChannelConfig, ChannelEvent, SendError};
use lifeline_transport_rdma::verbs::{Completion, Verbs, VerbsError};
use lifeline_transport_rdma::RdmaSysVerbs;

fn require() -> bool {
    std::env::var("LIFELINE_REQUIRE_RDMA").is_ok_and(|v| v == "1")
}

fn frame(i: u32) -> Bytes {
    let len = [1usize, 100, 8188, 8192, 20_000][i as usize % 5];
    let mut v = vec![(i % 251) as u8; len.max(4)];
    v[..4].copy_from_slice(&i.to_be_bytes());
    Bytes::from(v)
}

#[test]
fn rc_loopback_ping_pong() {
    let mut verbs = match RdmaSysVerbs::open(None, 4096) {
        Ok(v) => v,
        Err(e) if !require() => {
            let why = match e {
                VerbsError::NoDevice(why) => why,
                other => other.to_string(),
            };
            println!("skipped: no RDMA device ({why})");
            return;
        }
        Err(e) => panic!("LIFELINE_REQUIRE_RDMA=1 but no RDMA device: {e}"),
    };
    let cfg = ChannelConfig::default();
    let ba = Buffers::register(&mut verbs, cfg).unwrap();
    let bb = Buffers::register(&mut verbs, cfg).unwrap();
    let mut a = Channel::open(&mut verbs, ba, 0x1234).unwrap();
    let mut b = Channel::open(&mut verbs, bb, 0x5678).unwrap();
    let (da, db) = (a.local(&verbs), b.local(&verbs));
    a.connect(&mut verbs, &db).unwrap();
    b.connect(&mut verbs, &da).unwrap();

    const N: u32 = 2000;
    let deadline = Wall::now() + Duration::from_secs(30);
    let now = Instant::ZERO;
    let (mut next, mut got_b, mut got_a) = (0u32, 0u32, 0u32);
    let mut echo = std::collections::VecDeque::new();
    let mut cqes = [Completion::EMPTY; 64];
    // a sends i, b echoes it, a checks the echo: every frame arrives whole and in order.
    while got_a < N {
        assert!(
            Wall::now() < deadline,
            "stalled: sent {next}, b got {got_b}, a got {got_a}"
        );
        while next < N && a.send(frame(next)).is_ok() {
            next += 1;
        }
        let n = verbs.poll_cq(&mut cqes).unwrap();
        for c in &cqes[..n] {
            if !a.handle_completion(now, &mut verbs, c) {
                b.handle_completion(now, &mut verbs, c);
            }
        }
        while let Some(f) = b.poll_frame(now, &mut verbs) {
            assert_eq!(f, frame(got_b));
            got_b += 1;
            echo.push_back(f);
        }
        // Back-pressure: what b cannot queue now waits here and is retried.
        while let Some(f) = echo.pop_front() {
            match b.send(f) {
                Ok(_) => {}
                Err(SendError::WouldBlock(f)) => {
                    echo.push_front(f);
                    break;
                }
                Err(e) => panic!("echo: {e}"),
            }
        }
        while let Some(f) = a.poll_frame(now, &mut verbs) {
            assert_eq!(f, frame(got_a));
            got_a += 1;
        }
        for ch in [&mut a, &mut b] {
            assert_eq!(ch.poll_event(), None, "unexpected link-down");
            ch.poll_transmit(now, &mut verbs);
        }
    }

    // Closing one side flushes it: exactly one link-down there, and its flushes are quiet.
    a.close(now, &mut verbs);
    let deadline = Wall::now() + Duration::from_secs(5);
    while !a.is_drained() && Wall::now() < deadline {
        let n = verbs.poll_cq(&mut cqes).unwrap();
        for c in &cqes[..n] {
            if !a.handle_completion(now, &mut verbs, c) {
                b.handle_completion(now, &mut verbs, c);
            }
        }
    }
    assert!(a.is_drained(), "flushes must return every slot");
    assert!(matches!(
        a.poll_event(),
        Some(ChannelEvent::LinkDown { .. })
    ));
    assert_eq!(a.poll_event(), None);
    println!(
        "rc loopback: {N} frames echoed; stats a={:?} b={:?}",
        a.stats(),
        b.stats()
    );
}
