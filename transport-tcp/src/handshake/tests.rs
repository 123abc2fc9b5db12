use super::*;
use lifeline_transport_common::AddressBook;
use tokio::io::AsyncWriteExt;

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
        let r = accept(&mut b, &key, Rank(1), &book, ip).await;
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
    // Unknown rank, wrong target.
    let (_, a) = run(b"k", Rank(9), Rank(1), "127.0.0.1").await;
    assert!(matches!(a, Err(HandshakeError::UnknownRank(Rank(9)))));
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
        let h = accept(&mut b, &key, Rank(1), &book(), "127.0.0.1".parse().unwrap()).await;
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
    let r = accept(&mut b, &key, Rank(1), &book(), "127.0.0.1".parse().unwrap()).await;
    assert!(matches!(r, Err(HandshakeError::Garbage)));
}
