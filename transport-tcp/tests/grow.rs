//! A rank joins a running cluster: its address is added to the running nodes' books, they grow
//! their span, and broadcasts and reliable messages reach it both ways.

use lifeline_core::RelmEvent;
use lifeline_core::XcastEvent;
use std::time::Duration;

use bytes::Bytes;
use lifeline_core::tree::Rank;
use lifeline_core::{Config, Event, Instant, Node};
use lifeline_transport_tcp::{
    spawn, AddressBook, ClusterKey, Output, TcpConfig, TcpNode, TransportError,
};
use tokio::net::TcpListener;
use tokio::time::Instant as Tick;

fn node(span: u32, r: u32, joiner: bool) -> Node {
    let mut c = Config::new(span, 2);
    c.joiner = joiner;
    Node::new(c, Rank(r), 1, Instant::ZERO).unwrap()
}

/// Drains `n`'s outputs until `want` holds for one of them, or panics after 10 s.
async fn until(n: &mut TcpNode, what: &str, mut want: impl FnMut(&Output) -> bool) {
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_joiner_is_reached_after_grow() {
    let ls: Vec<TcpListener> = bind_listeners(3).await;
    let addrs: Vec<std::net::SocketAddr> = ls.iter().map(|l| l.local_addr().unwrap()).collect();
    let addr = |i: usize| addrs[i];
    let key = ClusterKey::from_secret(b"grow").unwrap();
    let mut book = AddressBook::new();
    book.insert(Rank(0), addr(0));
    book.insert(Rank(1), addr(1));
    let mut full = book.clone();
    full.insert(Rank(2), addr(2));
    let mut joined = AddressBook::new();
    joined.insert(Rank(2), addr(2));
    let mut it = ls.into_iter();
    let (l0, l1, l2) = (it.next().unwrap(), it.next().unwrap(), it.next().unwrap());
    let n0 = spawn(
        node(2, 0, false),
        book.clone(),
        key.clone(),
        TcpConfig::default(),
        l0,
    );
    let mut n1 = spawn(
        node(2, 1, false),
        book,
        key.clone(),
        TcpConfig::default(),
        l1,
    );
    until(&mut n1, "1 links up", |o| {
        matches!(o, Output::LinkUp { .. })
    })
    .await;

    // A changed address is refused, all or nothing.
    let mut bad = joined.clone();
    bad.insert(Rank(1), addr(2));
    assert!(matches!(
        n0.handle.add_peers(&bad),
        Err(TransportError::AddressConflict { rank: Rank(1), .. })
    ));

    // Rank 2 starts as a joiner of span 3; the running nodes learn its address and grow.
    let mut n2 = spawn(node(3, 2, true), full, key, TcpConfig::default(), l2);
    n0.handle.grow(3, &joined).await.unwrap();
    n1.handle.grow(3, &joined).await.unwrap();
    until(&mut n2, "2 links up with its parent", |o| {
        matches!(o, Output::LinkUp { peer: Rank(0), .. })
    })
    .await;

    // A broadcast from the joiner reaches rank 1; a reliable message from 1 reaches 2.
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
    until(&mut n1, "1 hears the ACK", |o| {
        matches!(
            o,
            Output::Event(Event::Relm(RelmEvent::Acked { dst: Rank(2), .. }))
        )
    })
    .await;
    for n in [&n0, &n1, &n2] {
        n.handle.shutdown().await;
    }
}

async fn bind_listeners(n: usize) -> Vec<TcpListener> {
    let mut v = Vec::new();
    for _ in 0..n {
        v.push(TcpListener::bind("127.0.0.1:0").await.unwrap());
    }
    v
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
