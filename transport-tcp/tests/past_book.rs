//! Ranks past the address book (handshake version 2): a launched rank knows only its peers
//! file, so a rank admitted past it (a joiner a grow made its parent) is refused unless the
//! HELLO lets it be learned. Real sockets, one real node, hand-made dialers.

use std::time::Duration;

use lifeline_core::tree::Rank;
use lifeline_core::{Class, Config, Instant, Node};
use lifeline_transport_tcp::handshake::{self, HandshakeError, Listen, MAGIC};
use lifeline_transport_tcp::{spawn, AddressBook, ClusterKey, Output, TcpConfig, TcpNode};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

const WAIT: Duration = Duration::from_secs(10);

/// Rank 0 of a launch of two (its book holds ranks 0 and 1; rank 1 never starts).
async fn launched() -> (TcpNode, AddressBook, TcpListener) {
    let l0 = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let l1 = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let mut book = AddressBook::new();
    book.insert(Rank(0), l0.local_addr().unwrap());
    book.insert(Rank(1), l1.local_addr().unwrap());
    let node = Node::new(Config::new(2, 2), Rank(0), 1, Instant::ZERO).unwrap();
    let key = ClusterKey::from_secret(b"past").unwrap();
    (
        spawn(node, book.clone(), key, TcpConfig::default(), l0),
        book,
        l1,
    )
}

/// Waits until `f` holds of rank 0's counters.
async fn until(
    n: &TcpNode,
    what: &str,
    f: impl Fn(&lifeline_transport_tcp::TransportStats) -> bool,
) {
    let t = tokio::time::Instant::now();
    while !f(&n.handle.stats()) {
        assert!(t.elapsed() < WAIT, "{what}: {:?}", n.handle.stats());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A real node past the book (rank 2, span 3: rank 0 is its parent) dials rank 0, whose book
/// holds only ranks 0 and 1: its HELLO announces span 3 and its port, rank 0 learns it and
/// takes the link (it was refused before version 2).
#[tokio::test]
async fn a_rank_past_the_book_is_learned_and_linked() {
    let (mut n0, book, _l1) = launched().await;
    let l2 = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let mut book2 = book.clone();
    book2.insert(Rank(2), l2.local_addr().unwrap());
    let node2 = Node::new(Config::new(3, 2), Rank(2), 2, Instant::ZERO).unwrap();
    let key = ClusterKey::from_secret(b"past").unwrap();
    let mut n2 = spawn(node2, book2, key, TcpConfig::default(), l2);
    let up = tokio::time::timeout(WAIT, async {
        loop {
            match n2.outputs.recv().await {
                Some(Output::LinkUp { peer, .. }) => break peer,
                Some(_) => {}
                None => panic!("rank 2 stopped"),
            }
        }
    })
    .await
    .expect("rank 2 links up to its parent");
    assert_eq!(up, Rank(0));
    until(&n0, "rank 2 learned", |s| s.peers_learned == 1).await;
    let s = n0.handle.stats();
    assert_eq!((s.handshakes_refused, s.refused_dead), (0, 0), "{s:?}");
    while let Ok(o) = n0.outputs.try_recv() {
        assert!(
            !matches!(o, Output::LinkDown { peer: Rank(2), .. }),
            "{o:?}"
        );
    }
    n2.handle.shutdown().await;
    n0.handle.shutdown().await;
}

/// What may not be learned is refused and counted, and learns nothing: a rank past the bound,
/// a dialer without the key, one announcing no port, an old-version HELLO, garbage.
#[tokio::test]
async fn refusals_past_the_book_are_counted_and_learn_nothing() {
    let (n0, book, _l1) = launched().await;
    let addr = book.get(Rank(0)).unwrap();
    let key = ClusterKey::from_secret(b"past").unwrap();
    let wrong = ClusterKey::from_secret(b"not it").unwrap();
    // Past the bound (join.max_per_view × 64 = 65,536 ranks past the given span 2).
    let far = Rank(2 + 65_536);
    let cases = [
        (
            &key,
            far,
            Listen {
                span: far.0 + 1,
                port: 9,
            },
        ),
        (&wrong, Rank(2), Listen { span: 3, port: 9 }),
        (&key, Rank(2), Listen { span: 3, port: 0 }),
        (&key, Rank(5), Listen { span: 5, port: 9 }),
    ];
    for (i, (k, me, listen)) in cases.into_iter().enumerate() {
        let mut s = TcpStream::connect(addr).await.unwrap();
        let r = tokio::time::timeout(
            WAIT,
            handshake::dial_announcing(&mut s, k, me, Rank(0), Class::Control, listen),
        )
        .await
        .expect("the handshake ends");
        assert!(r.is_err(), "case {i}: {r:?}");
        if i == 1 {
            assert!(matches!(r, Err(HandshakeError::BadMac)), "{r:?}");
        }
        until(&n0, "refusal counted", |s| {
            s.handshakes_refused == i as u64 + 1
        })
        .await;
    }
    // A version-1 HELLO: refused at its version byte, counted as such.
    let mut s = TcpStream::connect(addr).await.unwrap();
    let mut v1 = [0u8; 46];
    v1[..4].copy_from_slice(&MAGIC);
    v1[4] = 1;
    s.write_all(&v1).await.unwrap();
    until(&n0, "old version counted", |s| {
        s.handshakes_old_version == 1 && s.handshakes_refused == 5
    })
    .await;
    // Garbage.
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(&[0x55; 64]).await.unwrap();
    until(&n0, "garbage counted", |s| s.handshakes_refused == 6).await;
    let s = n0.handle.stats();
    assert_eq!((s.peers_learned, s.handshakes_old_version), (0, 1), "{s:?}");
    n0.handle.shutdown().await;
}
