use super::*;
use lifeline_transport_common::AddressBook;
use tokio::io::AsyncWriteExt;

/// No rank past the book may be learned.
const PAST: PastBook = PastBook { given: 3, bound: 0 };

fn book() -> AddressBook {
    AddressBook::parse("0 127.0.0.1:1\n1 127.0.0.1:2\n2 10.0.0.9:3").unwrap()
}

async fn run(
    dial_key: &[u8],
    from: Rank,
    to: Rank,
    ip: &str,
) -> (Result<(), HandshakeError>, Result<Hello, HandshakeError>) {
    let (mut a, b) = tokio::io::duplex(1024);
    let key = ClusterKey::from_secret(b"k").unwrap();
    let dkey = ClusterKey::from_secret(dial_key).unwrap();
    let ip: IpAddr = ip.parse().unwrap();
    let book = book();
    let acc = async move {
        let mut b = b;
        let r = accept(&mut b, &key, Rank(1), &book, PAST, ip).await;
        match &r {
            Ok(_) => finish(&mut b, Verdict::Accept).await.unwrap(),
            Err(_) => drop(b),
        }
        r
    };
    // Each side drops its end when done, as a real socket task does.
    let dialer = async move { dial(&mut a, &dkey, from, to, Class::Data).await };
    tokio::join!(dialer, acc)
}

#[tokio::test]
async fn mutual_proof() {
    let (d, a) = run(b"k", Rank(0), Rank(1), "127.0.0.1").await;
    assert!(d.is_ok(), "{d:?}");
    let h = a.unwrap();
    assert_eq!((h.from, h.to, h.class), (Rank(0), Rank(1), Class::Data));
}

#[tokio::test]
async fn refusals() {
    // Wrong key: the dialer sees the acceptor's MAC fail and gives up; the acceptor sees EOF.
    let (d, a) = run(b"other", Rank(0), Rank(1), "127.0.0.1").await;
    assert!(matches!(d, Err(HandshakeError::BadMac)), "{d:?}");
    assert!(a.is_err());
    // Claimed rank from the wrong IP.
    let (_, a) = run(b"k", Rank(2), Rank(1), "127.0.0.1").await;
    assert!(matches!(a, Err(HandshakeError::AddressMismatch { .. })));
    // A rank past the book that announced nothing (and the bound is 0 here), wrong target.
    let (_, a) = run(b"k", Rank(9), Rank(1), "127.0.0.1").await;
    assert!(matches!(
        a,
        Err(HandshakeError::PastBook { rank: Rank(9), .. })
    ));
    let (_, a) = run(b"k", Rank(0), Rank(2), "127.0.0.1").await;
    assert!(matches!(a, Err(HandshakeError::UnknownRank(_))));
}

#[tokio::test]
async fn a_removed_dialer_is_told_its_epoch() {
    let (mut a, b) = tokio::io::duplex(1024);
    let key = ClusterKey::from_secret(b"k").unwrap();
    let dkey = key.clone();
    let acc = async move {
        let mut b = b;
        let h = accept(
            &mut b,
            &key,
            Rank(1),
            &book(),
            PAST,
            "127.0.0.1".parse().unwrap(),
        )
        .await;
        finish(
            &mut b,
            Verdict::Removed {
                epoch: 0x0102_0304_0506_0708,
            },
        )
        .await
        .unwrap();
        h
    };
    let dialer = async move { dial(&mut a, &dkey, Rank(0), Rank(1), Class::Control).await };
    let (d, a) = tokio::join!(dialer, acc);
    assert!(a.is_ok(), "{a:?}");
    assert!(
        matches!(
            d,
            Err(HandshakeError::Removed {
                epoch: 0x0102_0304_0506_0708
            })
        ),
        "{d:?}"
    );
}

#[tokio::test]
async fn garbage_is_refused() {
    let (mut a, mut b) = tokio::io::duplex(1024);
    a.write_all(&[0x55; HELLO_LEN]).await.unwrap();
    let key = ClusterKey::from_secret(b"k").unwrap();
    let r = accept(
        &mut b,
        &key,
        Rank(1),
        &book(),
        PAST,
        "127.0.0.1".parse().unwrap(),
    )
    .await;
    assert!(matches!(r, Err(HandshakeError::Garbage)));
}

/// Runs an announcing dialer claiming `from` (key `dial_key`, `listen`) against rank 1's
/// acceptor with book `book()` (given span 3) and `past`.
async fn run_past(
    dial_key: &[u8],
    from: Rank,
    listen: Listen,
    past: PastBook,
) -> (Result<(), HandshakeError>, Result<Hello, HandshakeError>) {
    let (mut a, b) = tokio::io::duplex(1024);
    let key = ClusterKey::from_secret(b"k").unwrap();
    let dkey = ClusterKey::from_secret(dial_key).unwrap();
    let acc = async move {
        let mut b = b;
        let ip = "127.0.0.1".parse().unwrap();
        let r = accept(&mut b, &key, Rank(1), &book(), past, ip).await;
        match &r {
            Ok(_) => finish(&mut b, Verdict::Accept).await.unwrap(),
            Err(_) => drop(b),
        }
        r
    };
    let dialer =
        async move { dial_announcing(&mut a, &dkey, from, Rank(1), Class::Control, listen).await };
    tokio::join!(dialer, acc)
}

/// A rank past the book is accepted when it proves the key, lies within the bound and below
/// the span it announced, and announced a port; its address is the connection's IP and that
/// port. Otherwise it is refused before the CHALLENGE ([`HandshakeError::PastBook`]), or for a
/// wrong key at the PROOF: nothing is learned.
#[tokio::test]
async fn a_rank_past_the_book_is_accepted_only_authenticated_and_within_bound() {
    let past = PastBook { given: 3, bound: 4 };
    let listen = Listen {
        span: 7,
        port: 7006,
    };
    let (d, a) = run_past(b"k", Rank(6), listen, past).await;
    assert!(d.is_ok(), "{d:?}");
    let h = a.unwrap();
    assert_eq!((h.from, h.listen), (Rank(6), listen));
    assert_eq!(
        h.listen_addr("::ffff:127.0.0.1".parse().unwrap()),
        "127.0.0.1:7006".parse().unwrap()
    );
    // Out of bound (3 + 4 = 7 is the first rank past it), at or past its own span, without
    // a port, or announcing nothing at all: refused, counted by the caller.
    for (rank, listen) in [
        (7, Listen { span: 9, port: 1 }),
        (6, Listen { span: 6, port: 1 }),
        (5, Listen { span: 7, port: 0 }),
        (5, Listen::default()),
    ] {
        let (_, a) = run_past(b"k", Rank(rank), listen, past).await;
        assert!(
            matches!(a, Err(HandshakeError::PastBook { rank: r, .. }) if r == Rank(rank)),
            "{rank} {listen:?}: {a:?}"
        );
    }
    // Within the bound but without the key: the PROOF fails (the dialer stops first).
    let (d, a) = run_past(b"other", Rank(6), listen, past).await;
    assert!(matches!(d, Err(HandshakeError::BadMac)), "{d:?}");
    assert!(a.is_err());
    // A bound of 0 learns nothing.
    let none = PastBook { given: 3, bound: 0 };
    let (_, a) = run_past(b"k", Rank(3), listen, none).await;
    assert!(matches!(a, Err(HandshakeError::PastBook { .. })), "{a:?}");
}

/// A version-1 HELLO (46 bytes, version byte 1) is refused at its version byte, before the
/// acceptor waits for bytes that never come; a truncated HELLO is an I/O error, never a panic.
#[tokio::test]
async fn an_old_version_or_truncated_hello_is_refused() {
    let key = ClusterKey::from_secret(b"k").unwrap();
    let ip: IpAddr = "127.0.0.1".parse().unwrap();
    let (mut a, mut b) = tokio::io::duplex(1024);
    let mut v1 = [0u8; 46];
    v1[..4].copy_from_slice(&MAGIC);
    v1[4] = 1;
    a.write_all(&v1).await.unwrap();
    let r = accept(&mut b, &key, Rank(1), &book(), PAST, ip).await;
    assert!(matches!(r, Err(HandshakeError::Version(1))), "{r:?}");
    let d = Dialer::new(&key, Rank(0), Rank(1), Class::Data, [1; 32]);
    for cut in [3, 4, 5, 30, HELLO_LEN - 1] {
        let (mut a, mut b) = tokio::io::duplex(1024);
        a.write_all(&d.hello()[..cut]).await.unwrap();
        drop(a);
        let r = accept(&mut b, &key, Rank(1), &book(), PAST, ip).await;
        assert!(matches!(r, Err(HandshakeError::Io(_))), "{cut}: {r:?}");
    }
}
