//! Simultaneous dials between a pair settle on one connection per class, with no link-down.

use lifeline_core::FloodEvent;
use std::time::Duration;

use bytes::Bytes;
use lifeline_core::tree::Rank;
use lifeline_core::wire::{FloodMsg, Message};
use lifeline_core::{Class, Config, Event, Instant, Node};
use lifeline_transport_tcp::{spawn, AddressBook, ClusterKey, Output, TcpConfig, TcpNode};
use tokio::net::TcpListener;

async fn pair() -> (TcpNode, TcpNode) {
    let l0 = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let l1 = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let mut book = AddressBook::new();
    book.insert(Rank(0), l0.local_addr().unwrap());
    book.insert(Rank(1), l1.local_addr().unwrap());
    let key = ClusterKey::from_secret(b"tie").unwrap();
    let node = |r| Node::new(Config::new(2, 2), Rank(r), 1, Instant::ZERO).unwrap();
    let n1 = spawn(node(1), book.clone(), key.clone(), TcpConfig::default(), l1);
    let n0 = spawn(node(0), book, key, TcpConfig::default(), l0);
    (n0, n1)
}

fn frame(id: u64) -> Bytes {
    Message::Flood(FloodMsg {
        origin: Rank(0),
        id,
        hops: 0,
        payload: Bytes::from_static(b"x"),
    })
    .encode()
}

/// Rank 1 dials its parent 0 at start while 0, at once, sends to 1 (a dial the other way).
/// Repeated to meet the race in its several orders: every time each side reports the link up
/// exactly once, never down, and both classes carry frames.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simultaneous_dials_settle() {
    let mut duplicates = 0;
    for round in 0..20u64 {
        let (mut n0, mut n1) = pair().await;
        for (i, class) in [Class::Control, Class::Data].into_iter().enumerate() {
            n0.handle
                .send_raw(Rank(1), class, frame(10 * round + i as u64 + 1))
                .await
                .unwrap();
        }
        let mut ups = [0, 0];
        let mut delivered = 0;
        let end = tokio::time::Instant::now() + Duration::from_secs(10);
        while (ups != [1, 1] || delivered < 2) && tokio::time::Instant::now() < end {
            tokio::select! {
                Some(o) = n0.outputs.recv() => match o {
                    Output::LinkUp { .. } => ups[0] += 1,
                    Output::LinkDown { .. } => panic!("round {round}: link down at 0: {o:?}"),
                    _ => {}
                },
                Some(o) = n1.outputs.recv() => match o {
                    Output::LinkUp { .. } => ups[1] += 1,
                    Output::LinkDown { .. } => panic!("round {round}: link down at 1: {o:?}"),
                    Output::Event { event: Event::Flood(FloodEvent::Delivered { .. }), .. } => delivered += 1,
                    _ => {}
                },
                () = tokio::time::sleep(Duration::from_millis(10)) => {}
            }
        }
        assert_eq!(ups, [1, 1], "round {round}");
        assert_eq!(delivered, 2, "round {round}");
        // Nothing more happens: no late link-down from a losing connection.
        tokio::time::sleep(Duration::from_millis(50)).await;
        while let Ok(o) = n0.outputs.try_recv() {
            assert!(
                !matches!(o, Output::LinkDown { .. } | Output::LinkUp { .. }),
                "{o:?}"
            );
        }
        while let Ok(o) = n1.outputs.try_recv() {
            assert!(
                !matches!(o, Output::LinkDown { .. } | Output::LinkUp { .. }),
                "{o:?}"
            );
        }
        let (s0, s1) = (n0.handle.stats(), n1.handle.stats());
        assert_eq!((s0.link_downs, s1.link_downs), (0, 0));
        duplicates += s0.duplicates + s1.duplicates;
        n0.handle.shutdown().await;
        n1.handle.shutdown().await;
        let _ = n0.task.await;
        let _ = n1.task.await;
    }
    eprintln!(
        "simultaneous_dials_settle: {duplicates} duplicate connections resolved in 20 rounds"
    );
}
