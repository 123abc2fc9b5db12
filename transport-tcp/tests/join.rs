//! Joins over TCP, end to end on loopback: processes (here tasks, each with its own listener,
//! joiner and node) join a running cluster through one contact and through several, get
//! distinct ranks and the address book, and then exchange xcasts and RELM messages with the
//! members; join connections that are malformed, unauthenticated or past the bound are
//! refused and counted, and nothing they sent reaches the core.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use lifeline_core::join::JoinRequest;
use lifeline_core::tree::Rank;
use lifeline_core::{Config, Event, Instant, MembershipEvent, Node, RelmEvent, XcastEvent};
use lifeline_transport_tcp::handshake::join::{JoinDialer, JOIN_CHALLENGE_LEN, JOIN_HELLO_LEN};
use lifeline_transport_tcp::join::join;
use lifeline_transport_tcp::{
    spawn, AddressBook, ClusterKey, DownReason, Handle, JoinSettings, Joined, Output, TcpConfig,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

const RADIX: u32 = 2;

fn key() -> ClusterKey {
    ClusterKey::from_secret(b"join test").unwrap()
}

/// The configuration every node starts from (a joiner's is this, for its admission).
fn config(span: u32) -> Config {
    let mut c = Config::new(span, RADIX);
    c.detect.enabled = true;
    c
}

/// Running nodes by rank, their outputs merged into one channel (always drained).
struct Cluster {
    handles: BTreeMap<Rank, Handle>,
    rx: mpsc::UnboundedReceiver<(Rank, Output)>,
    tx: mpsc::UnboundedSender<(Rank, Output)>,
    /// Everything seen so far, by node.
    seen: BTreeMap<Rank, Vec<Output>>,
}

impl Cluster {
    fn new() -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        Self {
            handles: BTreeMap::new(),
            rx,
            tx,
            seen: BTreeMap::new(),
        }
    }

    fn add(&mut self, rank: Rank, mut node: lifeline_transport_tcp::TcpNode) {
        self.handles.insert(rank, node.handle.clone());
        let tx = self.tx.clone();
        tokio::spawn(async move {
            while let Some(o) = node.outputs.recv().await {
                let _ = tx.send((rank, o));
            }
        });
    }

    /// Takes outputs until `done` holds of everything seen (checked after each), or panics
    /// after `within` naming `what`.
    async fn until(
        &mut self,
        what: &str,
        within: Duration,
        done: impl Fn(&BTreeMap<Rank, Vec<Output>>) -> bool,
    ) {
        let end = tokio::time::Instant::now() + within;
        while !done(&self.seen) {
            match tokio::time::timeout_at(end, self.rx.recv()).await {
                Ok(Some((r, o))) => self.seen.entry(r).or_default().push(o),
                _ => panic!("{what}: not within {within:?}; seen: {:#?}", self.seen),
            }
        }
    }
}

fn events(v: &[Output]) -> impl Iterator<Item = &Event> {
    v.iter().filter_map(Output::event)
}

fn xcast_deliveries(v: &[Output], payload: &[u8]) -> usize {
    events(v)
        .filter(
            |e| matches!(e, Event::Xcast(XcastEvent::Delivered { payload: p, .. }) if p == payload),
        )
        .count()
}

fn relm_deliveries(v: &[Output], payload: &[u8]) -> usize {
    events(v)
        .filter(
            |e| matches!(e, Event::Relm(RelmEvent::Delivered { payload: p, .. }) if p == payload),
        )
        .count()
}

fn relm_acked(v: &[Output], dst: Rank) -> bool {
    events(v).any(|e| matches!(e, Event::Relm(RelmEvent::Acked { dst: d, .. }) if *d == dst))
}

/// Starts `n` members on 127.0.0.1 and waits until every non-root has its parent link.
async fn members(n: u32, tcp: &TcpConfig, cfg: impl Fn(u32) -> Config) -> (Cluster, AddressBook) {
    let mut book = AddressBook::new();
    let mut ls = Vec::new();
    for r in 0..n {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        book.insert(Rank(r), l.local_addr().unwrap());
        ls.push(l);
    }
    let mut c = Cluster::new();
    for (r, l) in ls.into_iter().enumerate() {
        let r = r as u32;
        let node = Node::new(cfg(n), Rank(r), u64::from(r) + 1, Instant::ZERO).unwrap();
        c.add(Rank(r), spawn(node, book.clone(), key(), tcp.clone(), l));
    }
    c.until("members wired", Duration::from_secs(10), |seen| {
        let ups: usize = seen
            .values()
            .map(|v| {
                v.iter()
                    .filter(|o| matches!(o, Output::LinkUp { .. }))
                    .count()
            })
            .sum();
        ups >= 2 * (n as usize - 1)
    })
    .await;
    (c, book)
}

/// One joiner "process": binds its listener, joins through `contacts`, starts its node.
async fn joiner(contacts: Vec<SocketAddr>, seed: u64) -> (Joined, lifeline_transport_tcp::TcpNode) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let tcp = TcpConfig::default();
    let joined = join(
        &contacts,
        addr,
        &key(),
        &tcp,
        &JoinSettings::default(),
        seed,
    )
    .await
    .expect("admitted");
    let cfg = config(1)
        .for_admission(&joined.admission)
        .expect("same radix");
    let node = Node::new(cfg, joined.admission.rank, seed, Instant::ZERO).unwrap();
    let running = spawn(node, joined.book.clone(), key(), tcp, l);
    (joined, running)
}

/// 5 members; 6 joiners at once, 3 through rank 1 alone and 3 through a contact that is gone
/// and ranks 2, 3 and 0 in turn. Each gets its own rank past the span, the whole book (members and the joiners of
/// its view, itself at its own address); every member reports the views that admitted them
/// and adds their addresses (none refused, no link down for want of one). Then an xcast from
/// a member and one from a joiner reach all 11 ranks exactly once, and RELM messages from a
/// member to a joiner and from a joiner to a member are delivered and acknowledged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn joiners_through_one_and_several_contacts_become_members() {
    let n = 5u32;
    let tcp = TcpConfig::default();
    let (mut c, book) = members(n, &tcp, config).await;
    let addr = |r: u32| book.get(Rank(r)).unwrap();
    // A contact that is gone (nothing listens there): the joiners that try it first go on.
    let gone = {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        l.local_addr().unwrap()
    };
    let t0 = std::time::Instant::now();
    let mut tasks = Vec::new();
    for j in 0..6u64 {
        let contacts = if j < 3 {
            vec![addr(1)]
        } else {
            vec![gone, addr(2), addr(3), addr(0)]
        };
        tasks.push(tokio::spawn(joiner(contacts, 0x5eed_0000 + j)));
    }
    let mut joined = Vec::new();
    for t in tasks {
        joined.push(t.await.unwrap());
    }
    let took = t0.elapsed();
    let ranks: BTreeSet<u32> = joined.iter().map(|(j, _)| j.admission.rank.0).collect();
    assert_eq!(ranks, (n..n + 6).collect(), "distinct ranks past the span");
    let epochs: BTreeSet<u64> = joined.iter().map(|(j, _)| j.admission.epoch).collect();
    for (j, _) in &joined {
        let me = j.admission.rank;
        for r in 0..n {
            assert_eq!(
                j.book.get(Rank(r)),
                Some(addr(r)),
                "member {r} in {me}'s book"
            );
        }
        // Every joiner of its own view is in its book (it may also know of earlier ones).
        for (o, _) in joined
            .iter()
            .filter(|(o, _)| o.admission.epoch == j.admission.epoch)
        {
            assert!(
                j.book.get(o.admission.rank).is_some(),
                "{me} lacks {}",
                o.admission.rank
            );
        }
        assert!(j.admission.snapshot.layout.span() > me.0);
        assert!(j.stats.tries >= 1);
    }
    eprintln!(
        "6 joins in {took:?}: {} admitting views (epochs {epochs:?}); tries {:?}; elapsed {:?}",
        epochs.len(),
        joined
            .iter()
            .map(|(j, _)| j.stats.tries)
            .collect::<Vec<_>>(),
        joined.iter().map(|(j, _)| j.elapsed).collect::<Vec<_>>(),
    );
    for (j, node) in joined {
        c.add(j.admission.rank, node);
    }
    let all: Vec<Rank> = (0..n + 6).map(Rank).collect();

    // Every member reports the admitting views, naming all 6 joiners.
    c.until(
        "members report the joins",
        Duration::from_secs(10),
        |seen| {
            (0..n).all(|r| {
                let got: BTreeSet<u32> = seen
                    .get(&Rank(r))
                    .map(|v| {
                        events(v)
                            .filter_map(|e| match e {
                                Event::Membership(MembershipEvent::Joined { joiners, .. }) => {
                                    Some(joiners.iter().map(|a| a.rank.0).collect::<Vec<_>>())
                                }
                                _ => None,
                            })
                            .flatten()
                            .collect()
                    })
                    .unwrap_or_default();
                got == (n..n + 6).collect()
            })
        },
    )
    .await;
    // Joiners link up with their parents (each joiner has its parent link).
    c.until("joiners link up", Duration::from_secs(10), |seen| {
        (n..n + 6).all(|r| {
            seen.get(&Rank(r))
                .is_some_and(|v| v.iter().any(|o| matches!(o, Output::LinkUp { .. })))
        })
    })
    .await;

    // An xcast from a member, one from a joiner: exactly once everywhere.
    let h0 = c.handles[&Rank(0)].clone();
    let hj = c.handles[&Rank(n + 2)].clone();
    send_retrying(|| h0.xcast(16, Bytes::from_static(b"from member 0"))).await;
    send_retrying(|| hj.xcast(16, Bytes::from_static(b"from a joiner"))).await;
    let everywhere = |seen: &BTreeMap<Rank, Vec<Output>>| {
        all.iter().all(|r| {
            seen.get(r).is_some_and(|v| {
                xcast_deliveries(v, b"from member 0") >= 1
                    && xcast_deliveries(v, b"from a joiner") >= 1
            })
        })
    };
    c.until("xcasts everywhere", Duration::from_secs(10), everywhere)
        .await;

    // RELM member 1 -> joiner n+4, and joiner n+5 -> member 3: delivered and acknowledged.
    let (a, b) = (Rank(n + 4), Rank(n + 5));
    let h1 = c.handles[&Rank(1)].clone();
    let hb = c.handles[&b].clone();
    send_retrying(|| {
        let h1 = h1.clone();
        async move {
            h1.command(move |node, now| {
                node.relm_send(now, a, 16, Bytes::from_static(b"to joiner"))
            })
            .await
            .map(|r| r.map(|_| 0).unwrap_or(0))
        }
    })
    .await;
    send_retrying(|| {
        let hb = hb.clone();
        async move {
            hb.command(move |node, now| {
                node.relm_send(now, Rank(3), 16, Bytes::from_static(b"from joiner"))
            })
            .await
            .map(|r| r.map(|_| 0).unwrap_or(0))
        }
    })
    .await;
    c.until("RELM both ways", Duration::from_secs(10), |seen| {
        relm_deliveries(&seen[&a], b"to joiner") == 1
            && relm_acked(&seen[&Rank(1)], a)
            && seen
                .get(&Rank(3))
                .is_some_and(|v| relm_deliveries(v, b"from joiner") == 1)
            && relm_acked(&seen[&b], Rank(3))
    })
    .await;
    // A moment for late duplicates, then: exactly once, nobody removed, no address missing.
    tokio::time::sleep(Duration::from_millis(300)).await;
    while let Ok((r, o)) = c.rx.try_recv() {
        c.seen.entry(r).or_default().push(o);
    }
    for r in &all {
        let v = &c.seen[r];
        assert_eq!(xcast_deliveries(v, b"from member 0"), 1, "rank {r}");
        assert_eq!(xcast_deliveries(v, b"from a joiner"), 1, "rank {r}");
        for o in v {
            assert!(
                !matches!(
                    o,
                    Output::LinkDown {
                        reason: DownReason::NoAddress,
                        ..
                    }
                ),
                "rank {r}: {o:?}"
            );
            assert!(
                !matches!(
                    o.event(),
                    Some(Event::Membership(MembershipEvent::FailureConfirmed { .. }))
                ),
                "rank {r}: {o:?}"
            );
        }
    }
    let mut answers = 0;
    for r in 0..n {
        let s = c.handles[&Rank(r)].stats();
        assert_eq!(s.joiner_addrs_refused, 0, "rank {r}: {s:?}");
        // Every joiner's address is in every member's book: added with its admission, or
        // learned first from its HELLO (a joiner that dialled before its admission reached
        // this member); its frames sent meanwhile were held, never dropped.
        assert_eq!(s.joiner_addrs_added + s.peers_learned, 6, "rank {r}: {s:?}");
        assert_eq!(s.early_dropped, 0, "rank {r}: {s:?}");
        answers += s.join_accepts;
    }
    assert!(answers >= 6, "{answers} admissions answered");
}

/// Runs `f` until it is not refused for back-pressure (the joiners' first links may still
/// be coming up).
async fn send_retrying<F, Fut>(f: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<u64, lifeline_transport_tcp::TransportError>>,
{
    for _ in 0..200 {
        if f().await.is_ok() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("command refused for 2 s");
}

/// Opens a join connection to `to` and runs the preamble with `key`, sending `request`;
/// returns the stream (after the request).
async fn preamble(to: SocketAddr, key: &ClusterKey, request: &[u8]) -> std::io::Result<TcpStream> {
    let mut s = TcpStream::connect(to).await?;
    let mut d = JoinDialer::new(key, [3; 32]);
    s.write_all(d.hello()).await?;
    let mut ch = [0u8; JOIN_CHALLENGE_LEN];
    s.read_exact(&mut ch).await?;
    let proof = d
        .on_challenge(&ch, request)
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    s.write_all(&proof).await?;
    s.write_all(request).await?;
    Ok(s)
}

/// Reads until the peer closes; the bytes read.
async fn until_closed(s: &mut TcpStream) -> usize {
    let mut buf = Vec::new();
    let r = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut buf)).await;
    assert!(r.is_ok(), "not closed within 5 s");
    buf.len()
}

/// Two members whose coordinator batches joins for 10 s (so a valid request waits at its
/// contact), and at most one open join connection. Refused and counted: garbage after the
/// join magic, a preamble with the wrong key (the joiner stops at the contact's challenge,
/// which it cannot check), a forged proof, an authenticated request the core cannot decode,
/// and a second authenticated request while one waits. The waiting one, closed by its joiner,
/// is reported to the core. The members' own links stay up throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_unauthenticated_and_excess_join_connections_are_refused() {
    let tcp = TcpConfig {
        max_join_conns: 1,
        ..TcpConfig::default()
    };
    let (mut c, book) = members(2, &tcp, |span| {
        let mut cfg = config(span);
        cfg.join.batch = Duration::from_secs(10).into();
        cfg
    })
    .await;
    let to = book.get(Rank(1)).unwrap();
    let h = c.handles[&Rank(1)].clone();
    let before = h.stats();

    // Garbage after the join magic.
    let mut s = TcpStream::connect(to).await.unwrap();
    let mut junk = b"LLJT".to_vec();
    junk.extend_from_slice(&[0xAB; JOIN_HELLO_LEN]);
    s.write_all(&junk).await.unwrap();
    assert_eq!(until_closed(&mut s).await, 0);
    // The wrong key: the contact's challenge does not check out; nothing keyed is sent.
    let wrong = ClusterKey::from_secret(b"not the key").unwrap();
    let e = preamble(to, &wrong, b"x").await.expect_err("refused");
    assert!(e.to_string().contains("cluster key"), "{e}");
    // A forged proof (the right challenge, a made-up MAC).
    let mut s = TcpStream::connect(to).await.unwrap();
    let d = JoinDialer::new(&wrong, [4; 32]);
    s.write_all(d.hello()).await.unwrap();
    let mut ch = [0u8; JOIN_CHALLENGE_LEN];
    s.read_exact(&mut ch).await.unwrap();
    let mut forged = [0u8; 36];
    forged[35] = 1;
    s.write_all(&forged).await.unwrap();
    s.write_all(b"x").await.unwrap();
    assert_eq!(until_closed(&mut s).await, 0);
    // Authenticated, but not a join request.
    let mut s = preamble(to, &key(), b"LLJ1 this is not a request")
        .await
        .unwrap();
    assert_eq!(until_closed(&mut s).await, 0, "closed unanswered");

    let refused = |s: &lifeline_transport_tcp::TransportStats| {
        (
            s.handshakes_refused - before.handshakes_refused,
            s.joins_refused - before.joins_refused,
        )
    };
    let wait = |what: &'static str, want: (u64, u64)| {
        let h = h.clone();
        async move {
            for _ in 0..200 {
                if refused(&h.stats()) == want {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            panic!("{what}: {:?} refused, want {want:?}", refused(&h.stats()));
        }
    };
    wait("after the bad ones", (3, 1)).await;
    let core = h.inspect(|n| n.join_stats()).await.unwrap();
    assert_eq!(core.join_requests_malformed, 1, "{core:?}");

    // A valid request waits (the coordinator batches for 10 s); a second one is refused.
    let req = |nonce: u64| {
        JoinRequest {
            id: lifeline_core::join::JoinId { nonce, seq: 1 },
            addr: Bytes::from_static(b"127.0.0.1:9"),
        }
        .encode()
    };
    let mut first = preamble(to, &key(), &req(1)).await.unwrap();
    for _ in 0..200 {
        if h.inspect(|n| n.join_stats().join_requests_in)
            .await
            .unwrap()
            >= 1
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let mut second = preamble(to, &key(), &req(2)).await.unwrap();
    assert_eq!(
        until_closed(&mut second).await,
        0,
        "past the bound: closed unanswered"
    );
    wait("past the bound", (3, 2)).await;
    // The waiting one closes early: the driver counts it and tells the core.
    first.shutdown().await.unwrap();
    drop(first);
    for _ in 0..200 {
        if h.stats().join_closed_early > before.join_closed_early {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let s = h.stats();
    assert_eq!(s.join_closed_early - before.join_closed_early, 1, "{s:?}");
    assert_eq!(s.join_conns - before.join_conns, 2, "{s:?}");
    assert_eq!(s.join_answers, before.join_answers, "{s:?}");
    // Nothing of it reached the links.
    tokio::time::sleep(Duration::from_millis(100)).await;
    while let Ok((r, o)) = c.rx.try_recv() {
        assert!(!matches!(o, Output::LinkDown { .. }), "rank {r}: {o:?}");
    }
}

/// A joiner whose address is not `ip:port` (only a holder of the key can send one) is still
/// admitted by the core, which treats addresses as opaque: every member counts and logs the
/// address it cannot use (`joiner_addrs_refused`), keeps the rank out of its book, and goes on;
/// the joiner's answer still carries the book.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unusable_joiner_address_is_counted_not_fatal() {
    let (c, book) = members(2, &TcpConfig::default(), config).await;
    let req = JoinRequest {
        id: lifeline_core::join::JoinId { nonce: 77, seq: 1 },
        addr: Bytes::from_static(b"not an address"),
    }
    .encode();
    let mut s = preamble(book.get(Rank(1)).unwrap(), &key(), &req)
        .await
        .unwrap();
    let mut len = [0u8; 4];
    tokio::time::timeout(Duration::from_secs(5), s.read_exact(&mut len))
        .await
        .expect("answered")
        .unwrap();
    let mut body = vec![0u8; u32::from_be_bytes(len) as usize + 32];
    s.read_exact(&mut body).await.unwrap();
    let n = body.len() - 32;
    let answer =
        lifeline_transport_tcp::JoinAnswer::decode(&Bytes::from(body[..n].to_vec()), 16).unwrap();
    let book2 = answer.book.expect("an admission comes with the book");
    assert_eq!(book2.get(Rank(2)), None, "{book2:?}");
    assert_eq!(book2.len(), 2);
    for r in 0..2 {
        let h = c.handles[&Rank(r)].clone();
        for _ in 0..200 {
            if h.stats().joiner_addrs_refused == 1 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let st = h.stats();
        assert_eq!(
            (st.joiner_addrs_refused, st.joiner_addrs_added),
            (1, 0),
            "rank {r}: {st:?}"
        );
    }
}
