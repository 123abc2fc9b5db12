//! A rank joins a running cluster: the running nodes learn its address and grow their span.

use super::*;
use lifeline_core::RelmEvent;

/// Ranks 0 and 1 run a two-rank cluster; rank 2 starts as a joiner of span 3 with the whole
/// book; ranks 0 and 1 grow to span 3 with rank 2's address (the adapter's endpoint was set up
/// without it: QUIC's checks inbound addresses, and either side may be the one that dials).
/// A grow that would move a known rank is refused first. Rank 2 must link up with its parent
/// (rank 0), its xcast must reach rank 1, and a RELM message from rank 1 must reach rank 2 and
/// be acknowledged.
pub async fn grow_reaches_joiner<T: Transport>() {
    bounded("grow_reaches_joiner", Duration::from_secs(60), async {
        let spec = Spec::new(2, 2);
        let mut book = Book::new();
        let mut eps = Vec::new();
        for r in 0..3u32 {
            let (ep, a) = T::bind(SocketAddr::from(LOOPBACK)).await;
            book.insert(Rank(r), a);
            eps.push(ep);
        }
        let mut first = book.clone();
        first.remove(&Rank(2));
        let joined: Book = book.iter().filter(|(r, _)| r.0 == 2).map(|(r, a)| (*r, *a)).collect();
        let mut eps = eps.into_iter();
        let mut nodes = Vec::new();
        for r in 0..2u32 {
            let ep = eps.next().expect("three endpoints");
            nodes.push(T::start(&spec, Rank(r), &first, ep).await);
        }
        let mut c = Cluster { nodes, book };
        let up = c
            .pump(Duration::from_secs(10), |_, o| o == Observed::LinkUp(Rank(0)))
            .await;
        assert!(up, "ranks 0 and 1 never linked");

        let joiner = Spec {
            span: 3,
            joiner: true,
            ..spec.clone()
        };
        let ep = eps.next().expect("three endpoints");
        let n2 = T::start(&joiner, Rank(2), &c.book, ep).await;
        c.nodes.push(n2);
        // A grow that would change a known rank's address is refused, all or nothing.
        let mut bad = joined.clone();
        bad.insert(Rank(1), c.addr(2));
        assert!(c.node(0).grow(3, &bad).await.is_err(), "a changed address was accepted");
        for r in 0..2u32 {
            let grown = c.node(r).grow(3, &joined).await;
            assert_eq!(grown, Ok(()), "rank {r} refused the grow");
        }
        let up = c
            .pump(Duration::from_secs(10), |r, o| {
                r == Rank(2) && o == Observed::LinkUp(Rank(0))
            })
            .await;
        assert!(up, "the joiner never linked up with its parent");

        let payload = Bytes::from_static(b"hello from the joiner");
        let mut seq = None;
        let end = StdInstant::now() + Duration::from_secs(10);
        while seq.is_none() {
            let p = payload.clone();
            let r = c.node(2).command(move |n, now| n.xcast(now, 16, p)).await;
            match r {
                Ok(Ok(s)) => seq = Some(s),
                // Back-pressure while the joiner catches up: retried.
                _ if StdInstant::now() < end => {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                other => panic!("the joiner's xcast was refused: {other:?}"),
            }
        }
        let reached = c
            .pump(Duration::from_secs(10), |r, o| {
                r == Rank(1)
                    && matches!(o, Observed::Event(Event::Xcast(XcastEvent::Delivered { origin: Rank(2), ref payload, .. })) if *payload == b"hello from the joiner"[..])
            })
            .await;
        assert!(reached, "the joiner's xcast never reached rank 1");

        retry(c.node(1), Duration::from_secs(10), |n, now| {
            n.relm_send(now, Rank(2), 16, Bytes::from_static(b"to the joiner"))
                .expect("relm accepted")
        })
        .await;
        let (mut delivered, mut acked) = (0, false);
        let done = c
            .pump(Duration::from_secs(10), |r, o| {
                match (r, o) {
                    (Rank(2), Observed::Event(Event::Relm(RelmEvent::Delivered { src: Rank(1), .. }))) => {
                        delivered += 1
                    }
                    (Rank(1), Observed::Event(Event::Relm(RelmEvent::Acked { dst: Rank(2), .. }))) => {
                        acked = true
                    }
                    _ => {}
                }
                delivered == 1 && acked
            })
            .await;
        assert!(
            done,
            "RELM to the joiner: delivered {delivered} times, acknowledged: {acked}"
        );
        c.stop().await;
    })
    .await;
}
