//! The rendezvous on loopback: a complete job, a wrong key, malformed and conflicting
//! registrations, the timeout naming the missing ranks, a forged book.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::wire::{self, Registration};
use super::*;
use lifeline_core::tree::Rank;

fn key(s: &str) -> BootstrapKey {
    BootstrapKey::from_secret(s.as_bytes()).unwrap()
}

fn listen(port: u16) -> SocketAddr {
    SocketAddr::from(([0, 0, 0, 0], port))
}

fn cfg(ms: u64) -> RendezvousConfig {
    RendezvousConfig {
        timeout: Duration::from_millis(ms),
        answer_grace: Duration::from_millis(500),
        retry: Duration::from_millis(20),
    }
}

async fn server(size: u32, ms: u64) -> (RendezvousServer, String) {
    let s = RendezvousServer::bind(
        "127.0.0.1:0".parse().unwrap(),
        key("k"),
        size,
        Duration::from_millis(ms),
    )
    .await
    .unwrap();
    let at = s.local_addr().unwrap().to_string();
    (s, at)
}

/// A loopback address nobody listens on (bound, read, released), for a rendezvous that the
/// test's rank 0 binds itself.
async fn free_addr() -> String {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    l.local_addr().unwrap().to_string()
}

#[tokio::test]
async fn a_job_forms_with_rank_0_hosting() {
    let at = free_addr().await;
    let mut tasks = Vec::new();
    // Rank 0 last, so the others retry until it is up.
    for r in [3u32, 1, 2, 0] {
        let at = at.clone();
        tasks.push(tokio::spawn(async move {
            if r != 0 {
                join(&at, &key("k"), r, 4, listen(7000 + r as u16), &cfg(5000)).await
            } else {
                tokio::time::sleep(Duration::from_millis(100)).await;
                join(&at, &key("k"), r, 4, listen(7000), &cfg(5000)).await
            }
        }));
    }
    let mut books = Vec::new();
    for t in tasks {
        let j = t.await.unwrap().unwrap();
        assert_eq!(j.me.ip().to_string(), "127.0.0.1");
        books.push(j);
    }
    for j in &books {
        assert_eq!(j.book, books[0].book);
        assert_eq!(j.book.len(), 4);
        assert_eq!(j.book.get(Rank(2)), Some("127.0.0.1:7002".parse().unwrap()));
    }
    let refused = books[3]
        .refused
        .as_ref()
        .expect("rank 0 reports its server");
    assert_eq!(refused.total(), 0);
}

#[tokio::test]
async fn a_wrong_key_is_refused_and_the_server_goes_on() {
    let (s, at) = server(1, 3000).await;
    let refused = s.refused();
    let run = tokio::spawn(s.run());
    let e = register(&at, &key("other"), 0, 1, listen(7000), &cfg(1000))
        .await
        .unwrap_err();
    assert!(matches!(e, BootstrapError::BadServerMac(_)), "{e}");
    let (book, _) = register(&at, &key("k"), 0, 1, listen(7000), &cfg(1000))
        .await
        .unwrap();
    assert_eq!(book.len(), 1);
    run.await.unwrap().unwrap();
    assert_eq!(refused.bad_mac.load(Ordering::Relaxed), 1);
}

/// A rank that registers with another key is named as such at rank 0 when the rendezvous
/// times out ("rank 1: wrong key"), not as "never registered"; a rank that never tried is.
#[tokio::test]
async fn a_wrong_key_is_named_at_rank_0() {
    let at = free_addr().await;
    let zero = tokio::spawn({
        let at = at.clone();
        async move { join(&at, &key("k"), 0, 3, listen(7000), &cfg(600)).await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let e = register(&at, &key("other"), 1, 3, listen(7001), &cfg(400))
        .await
        .unwrap_err();
    assert!(matches!(e, BootstrapError::BadServerMac(_)), "{e}");
    match zero.await.unwrap() {
        Err(e @ BootstrapError::Missing { .. }) => {
            let BootstrapError::Missing {
                missing, wrong_key, ..
            } = &e
            else {
                unreachable!()
            };
            assert_eq!(
                (missing.as_slice(), wrong_key.as_slice()),
                (&[1, 2][..], &[1][..])
            );
            assert_eq!(
                e.to_string(),
                "rendezvous timed out after 600 ms: rank 1: wrong key; rank(s) 2 never \
                 registered (1 of 3 did)"
            );
        }
        other => panic!("{other:?}"),
    }
}

/// Connects, runs HELLO and CHALLENGE with `k`, and sends `reg` (MACed with `k`).
async fn raw_register(at: &str, k: &BootstrapKey, reg: Registration) -> TcpStream {
    let mut s = TcpStream::connect(at).await.unwrap();
    let nonce_c = [7u8; 32];
    s.write_all(&wire::hello(reg.rank, &nonce_c)).await.unwrap();
    let mut ch = [0u8; wire::CHALLENGE_LEN];
    s.read_exact(&mut ch).await.unwrap();
    let mut nonce_s = [0u8; 32];
    nonce_s.copy_from_slice(&ch[4..36]);
    s.write_all(&wire::register(k, &nonce_c, &nonce_s, reg))
        .await
        .unwrap();
    s
}

async fn closed_unanswered(mut s: TcpStream) {
    let mut b = [0u8; 1];
    let n = tokio::time::timeout(Duration::from_secs(3), s.read(&mut b))
        .await
        .unwrap();
    assert!(matches!(n, Ok(0) | Err(_)), "{n:?}");
}

#[tokio::test]
async fn malformed_and_conflicting_registrations_are_counted() {
    let (s, at) = server(2, 5000).await;
    let refused = s.refused();
    let run = tokio::spawn(s.run());
    // Garbage instead of HELLO.
    let mut g = TcpStream::connect(&at).await.unwrap();
    g.write_all(&[0xAB; 200]).await.unwrap();
    closed_unanswered(g).await;
    // A registration MACed with another key (or replayed: the nonce differs).
    let reg = |rank, size, addr: &str| Registration {
        rank,
        size,
        addr: addr.parse().unwrap(),
    };
    closed_unanswered(raw_register(&at, &key("x"), reg(0, 2, "127.0.0.1:9")).await).await;
    // A bad address family byte.
    {
        let mut s = TcpStream::connect(&at).await.unwrap();
        let nonce_c = [1u8; 32];
        s.write_all(&wire::hello(0, &nonce_c)).await.unwrap();
        let mut ch = [0u8; wire::CHALLENGE_LEN];
        s.read_exact(&mut ch).await.unwrap();
        let mut nonce_s = [0u8; 32];
        nonce_s.copy_from_slice(&ch[4..36]);
        let mut b = wire::register(&key("k"), &nonce_c, &nonce_s, reg(0, 2, "127.0.0.1:9"));
        b[8] = 9;
        let m = wire::mac(&key("k"), wire::L_REGISTER, &[&nonce_c, &nonce_s, &b[..27]]);
        b[27..].copy_from_slice(&m);
        s.write_all(&b).await.unwrap();
        closed_unanswered(s).await;
    }
    // Authenticated but out of range, or of another size: refused with a MACed answer.
    let k = key("k");
    let e = register(&at, &k, 5, 2, listen(9), &cfg(1000))
        .await
        .unwrap_err();
    assert!(
        matches!(
            e,
            BootstrapError::Refused {
                reason: Refusal::OutOfRange,
                ..
            }
        ),
        "{e}"
    );
    let e = register(&at, &k, 1, 3, listen(9), &cfg(1000))
        .await
        .unwrap_err();
    assert!(
        matches!(
            e,
            BootstrapError::Refused {
                reason: Refusal::SizeMismatch,
                ..
            }
        ),
        "{e}"
    );
    // Rank 1 registers; a second rank 1 with another address is refused.
    let first = tokio::spawn({
        let at = at.clone();
        async move {
            register(
                &at,
                &key("k"),
                1,
                2,
                "127.0.0.1:7001".parse().unwrap(),
                &cfg(4000),
            )
            .await
        }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let e = register(&at, &k, 1, 2, "127.0.0.1:7999".parse().unwrap(), &cfg(1000))
        .await
        .unwrap_err();
    assert!(
        matches!(
            e,
            BootstrapError::Refused {
                reason: Refusal::Duplicate,
                ..
            }
        ),
        "{e}"
    );
    // The job still forms.
    let (book, _) = register(&at, &k, 0, 2, listen(7000), &cfg(1000))
        .await
        .unwrap();
    assert_eq!(first.await.unwrap().unwrap().0, book);
    assert_eq!(book.get(Rank(1)), Some("127.0.0.1:7001".parse().unwrap()));
    run.await.unwrap().unwrap();
    assert_eq!(refused.malformed.load(Ordering::Relaxed), 2);
    assert_eq!(refused.bad_mac.load(Ordering::Relaxed), 1);
    assert_eq!(refused.out_of_range.load(Ordering::Relaxed), 2);
    assert_eq!(refused.duplicate.load(Ordering::Relaxed), 1);
    assert_eq!(refused.total(), 6);
}

#[tokio::test]
async fn the_timeout_names_the_missing_ranks_everywhere() {
    let at = free_addr().await;
    let t0 = std::time::Instant::now();
    let a = tokio::spawn({
        let at = at.clone();
        async move { join(&at, &key("k"), 0, 4, listen(7000), &cfg(400)).await }
    });
    let b = tokio::spawn({
        let at = at.clone();
        async move { join(&at, &key("k"), 2, 4, listen(7002), &cfg(400)).await }
    });
    for t in [a, b] {
        match t.await.unwrap() {
            Err(BootstrapError::Missing {
                missing,
                wrong_key,
                size,
                ..
            }) => {
                assert_eq!((missing, wrong_key, size), (vec![1, 3], vec![], 4));
            }
            other => panic!("{other:?}"),
        }
    }
    let took = t0.elapsed();
    assert!(took < Duration::from_millis(400 + 500 + 300), "{took:?}");
    let e = BootstrapError::Missing {
        missing: vec![1, 3],
        wrong_key: vec![],
        size: 4,
        timeout: Duration::from_millis(400),
    };
    assert_eq!(
        e.to_string(),
        "rendezvous timed out after 400 ms: rank(s) 1, 3 never registered (2 of 4 did)"
    );
}

#[tokio::test]
async fn an_unreachable_rendezvous_is_reported_in_time() {
    let at = free_addr().await;
    let t0 = std::time::Instant::now();
    let e = join(&at, &key("k"), 1, 2, listen(7001), &cfg(300))
        .await
        .unwrap_err();
    assert!(matches!(e, BootstrapError::Unreachable { .. }), "{e}");
    assert!(t0.elapsed() < Duration::from_millis(600));
}

/// A fake rendezvous that holds the key but tampers with the answer (`tamper` edits the bytes
/// after they were MACed).
async fn fake(tamper: fn(&mut Vec<u8>)) -> String {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let at = l.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        let (mut s, _) = l.accept().await.unwrap();
        let k = key("k");
        let mut hello = [0u8; wire::HELLO_LEN];
        s.read_exact(&mut hello).await.unwrap();
        let (_, nonce_c) = wire::parse_hello(&hello).unwrap();
        let nonce_s = [3u8; 32];
        s.write_all(&wire::challenge(&k, &nonce_c, &nonce_s))
            .await
            .unwrap();
        let mut reg = [0u8; wire::REGISTER_LEN];
        s.read_exact(&mut reg).await.unwrap();
        let body = b"0 127.0.0.1:7000\n";
        let mut a = wire::answer(&k, &nonce_c, &nonce_s, wire::STATUS_BOOK, body);
        tamper(&mut a);
        let _ = s.write_all(&a).await;
        let _ = s.shutdown().await;
    });
    at
}

#[tokio::test]
async fn a_forged_or_oversized_book_is_refused() {
    let k = key("k");
    let me: SocketAddr = "127.0.0.1:7000".parse().unwrap();
    // Untouched: accepted.
    let at = fake(|_| {}).await;
    let (book, _) = register(&at, &k, 0, 1, me, &cfg(1000)).await.unwrap();
    assert_eq!(book.get(Rank(0)), Some(me));
    // Another address in the book: the MAC fails.
    let at = fake(|a| a[5 + 10] = b'9').await;
    let e = register(&at, &k, 0, 1, me, &cfg(1000)).await.unwrap_err();
    assert!(matches!(e, BootstrapError::BadAnswerMac), "{e}");
    // A length over the bound: refused before reading.
    let at = fake(|a| a[1..5].copy_from_slice(&u32::MAX.to_be_bytes())).await;
    let e = register(&at, &k, 0, 1, me, &cfg(1000)).await.unwrap_err();
    assert!(matches!(e, BootstrapError::Malformed(_)), "{e}");
    // Cut short.
    let at = fake(|a| a.truncate(20)).await;
    let e = register(&at, &k, 0, 1, me, &cfg(1000)).await.unwrap_err();
    assert!(matches!(e, BootstrapError::Malformed(_)), "{e}");
}
