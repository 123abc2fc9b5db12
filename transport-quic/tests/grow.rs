//! A rank joins a running QUIC cluster whose endpoints check addresses (bound with an address
//! book): its address is added to the running nodes' books by `grow`, and broadcasts and
//! reliable messages reach it both ways. (Which side dials is the link policy's choice; that an
//! endpoint accepts a rank added by a grow is `link.rs`'s `a_followed_book_admits_ranks_added_later`.)

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use lifeline_core::tree::Rank;
use lifeline_core::{Config, Event, Instant, Node, RelmEvent, XcastEvent};
use lifeline_transport_common::{AddressBook, DriverConfig, Output, RunningNode, TransportError};
use lifeline_transport_quic::{
    spawn, AddressBook as QuicBook, ClusterCa, ClusterId, QuicConfig, QuicEndpoint,
};
use tokio::time::Instant as Tick;

fn node(span: u32, r: u32, joiner: bool) -> Node {
    let mut c = Config::new(span, 2);
    c.joiner = joiner;
    Node::new(c, Rank(r), 1, Instant::ZERO).unwrap()
}

/// Drains `n`'s outputs until `want` holds for one of them, or panics after 10 s.
async fn until(n: &mut RunningNode, what: &str, mut want: impl FnMut(&Output) -> bool) {
    let end = Tick::now() + Duration::from_secs(10);
    loop {
        match tokio::time::timeout_at(end, n.outputs.recv()).await {
            Ok(Some(o)) if want(&o) => return,
            Ok(Some(_)) => {}
            Ok(None) => panic!("{what}: node stopped"),
            Err(_) => panic!("{what}: timed out"),
        }
    }
}

/// Retries a command refused for back-pressure (the joiner's links are still coming up).
async fn retry<F, Fut>(mut f: F) -> u64
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<u64, TransportError>>,
{
    for _ in 0..200 {
        match f().await {
            Ok(v) => return v,
            Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
    panic!("command never accepted")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_joiner_is_accepted_and_reached_after_grow() {
    let ca = ClusterCa::generate(
        ClusterId::new("grow").unwrap(),
        SystemTime::now() + Duration::from_secs(3600),
    )
    .unwrap();
    let socks: Vec<UdpSocket> = (0..3)
        .map(|_| UdpSocket::bind("127.0.0.1:0").unwrap())
        .collect();
    let addr = |i: usize| -> SocketAddr { socks[i].local_addr().unwrap() };
    let mut book = AddressBook::new();
    book.insert(Rank(0), addr(0));
    book.insert(Rank(1), addr(1));
    let mut full = book.clone();
    full.insert(Rank(2), addr(2));
    let mut joined = AddressBook::new();
    joined.insert(Rank(2), addr(2));
    let mut it = socks.into_iter();
    let mut start = |r: u32, span: u32, joiner: bool, book: &AddressBook| {
        let id = ca.identity(Rank(r)).unwrap();
        // Every endpoint checks addresses: bound with the book it starts with.
        let qbook = QuicBook::try_from(book).unwrap();
        let ep =
            QuicEndpoint::from_socket(&id, &QuicConfig::default(), it.next().unwrap(), Some(qbook))
                .unwrap();
        spawn(
            node(span, r, joiner),
            book.clone(),
            ep,
            DriverConfig::default(),
        )
        .unwrap()
    };
    let n0 = start(0, 2, false, &book);
    let mut n1 = start(1, 2, false, &book);
    until(&mut n1, "1 links up", |o| {
        matches!(o, Output::LinkUp { .. })
    })
    .await;

    // Rank 2 starts as a joiner of span 3; ranks 0 and 1, whose endpoints were bound without
    // rank 2 in their books, grow.
    let mut n2 = start(2, 3, true, &full);
    n0.handle.grow(3, &joined).await.unwrap();
    n1.handle.grow(3, &joined).await.unwrap();
    until(&mut n2, "2 links up with its parent", |o| {
        matches!(o, Output::LinkUp { peer: Rank(0), .. })
    })
    .await;

    let seq = retry(|| n2.handle.xcast(16, Bytes::from_static(b"hello from 2"))).await;
    until(&mut n1, "1 delivers 2's broadcast", |o| {
        matches!(o, Output::Event(Event::Xcast(XcastEvent::Delivered { origin: Rank(2), seq: s, .. })) if *s == seq)
    })
    .await;
    let h1 = n1.handle.clone();
    h1.command(|n, now| n.relm_send(now, Rank(2), 16, Bytes::from_static(b"to 2")))
        .await
        .unwrap()
        .unwrap();
    until(&mut n2, "2 delivers 1's message", |o| {
        matches!(
            o,
            Output::Event(Event::Relm(RelmEvent::Delivered { src: Rank(1), .. }))
        )
    })
    .await;
    for n in [&n0, &n1, &n2] {
        n.handle.shutdown().await;
    }
}
