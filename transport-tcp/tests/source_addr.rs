//! Outgoing connections carry the node's own address-book IP (`TcpConfig::bind_local`), so
//! nodes on distinct loopback addresses of one host pass each other's handshake IP check, and
//! a node that connects from another IP than its book entry is refused.
#![cfg(target_os = "linux")] // 127.0.0.0/8 is all loopback on Linux, no setup needed

use std::net::IpAddr;
use std::time::Duration;

use lifeline_core::tree::Rank;
use lifeline_core::{Config, Instant, Node};
use lifeline_transport_tcp::{
    spawn, AddressBook, BindLocal, ClusterKey, DownReason, Output, TcpConfig, TcpNode,
};
use tokio::net::TcpListener;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// Rank 1 at `ip1` with `bind`, its parent rank 0 at `ip0` (a real node, or the listener
/// returned when `real0` is false).
async fn pair(
    ip0: &str,
    ip1: &str,
    bind: BindLocal,
    real0: bool,
) -> (Option<TcpNode>, TcpNode, Option<TcpListener>) {
    let l0 = TcpListener::bind((ip(ip0), 0)).await.unwrap();
    let l1 = TcpListener::bind((ip(ip1), 0)).await.unwrap();
    let mut book = AddressBook::new();
    book.insert(Rank(0), l0.local_addr().unwrap());
    book.insert(Rank(1), l1.local_addr().unwrap());
    let key = ClusterKey::from_secret(b"source").unwrap();
    let node = |r| Node::new(Config::new(2, 2), Rank(r), 1, Instant::ZERO).unwrap();
    let cfg1 = TcpConfig {
        bind_local: bind,
        dial_attempts: 2,
        ..TcpConfig::default()
    };
    let n1 = spawn(node(1), book.clone(), key.clone(), cfg1, l1);
    if real0 {
        let n0 = spawn(node(0), book, key, TcpConfig::default(), l0);
        (Some(n0), n1, None)
    } else {
        (None, n1, Some(l0))
    }
}

/// By default a node on `127.0.1.R` dials from that address (the OS alone would use
/// 127.0.0.1).
#[tokio::test]
async fn dials_from_the_book_address() {
    let (_, n1, l0) = pair("127.0.1.31", "127.0.1.32", BindLocal::Auto, false).await;
    let (_, from) = tokio::time::timeout(Duration::from_secs(5), l0.unwrap().accept())
        .await
        .expect("rank 1 dials its parent")
        .unwrap();
    assert_eq!(from.ip(), ip("127.0.1.32"));
    n1.handle.shutdown().await;

    // `Os`: the kernel's choice for a loopback destination, not the book address.
    let (_, n1, l0) = pair("127.0.1.33", "127.0.1.34", BindLocal::Os, false).await;
    let (_, from) = tokio::time::timeout(Duration::from_secs(5), l0.unwrap().accept())
        .await
        .expect("rank 1 dials its parent")
        .unwrap();
    assert_eq!(from.ip(), ip("127.0.0.1"));
    n1.handle.shutdown().await;
}

/// Two real nodes on distinct loopback addresses link up; when rank 1 connects from another
/// IP than its book entry (`Os`), rank 0's handshake refuses it and rank 1 gives the link up.
#[tokio::test]
async fn the_handshake_checks_the_source_address() {
    let (n0, mut n1, _) = pair("127.0.1.35", "127.0.1.36", BindLocal::Auto, true).await;
    let mut n0 = n0.unwrap();
    let up = |o: Option<Output>| matches!(o, Some(Output::LinkUp { peer, .. }) if peer.0 < 2);
    let wait = Duration::from_secs(5);
    assert!(up(tokio::time::timeout(wait, n1.outputs.recv())
        .await
        .unwrap()));
    assert!(up(tokio::time::timeout(wait, n0.outputs.recv())
        .await
        .unwrap()));
    assert_eq!(n0.handle.stats().handshakes_refused, 0);
    n0.handle.shutdown().await;
    n1.handle.shutdown().await;

    let (n0, mut n1, _) = pair("127.0.1.37", "127.0.1.38", BindLocal::Os, true).await;
    let n0 = n0.unwrap();
    let down = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match n1.outputs.recv().await {
                Some(Output::LinkDown { peer, reason, .. }) => break (peer, reason),
                Some(Output::LinkUp { .. }) => panic!("linked up from the wrong address"),
                Some(_) => {}
                None => panic!("rank 1 stopped"),
            }
        }
    })
    .await
    .expect("rank 1 gives its parent up");
    assert_eq!(down, (Rank(0), DownReason::Unreachable));
    assert!(n0.handle.stats().handshakes_refused >= 1);
    n0.handle.shutdown().await;
    n1.handle.shutdown().await;
}
