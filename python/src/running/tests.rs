//! The running node's blocking API on loopback: start, events, commands, close, refusals.

use super::*;

fn free_ports(n: usize) -> Vec<u16> {
    let held: Vec<std::net::TcpListener> = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    held.iter()
        .map(|l| l.local_addr().unwrap().port())
        .collect()
}

fn start_all(n: u32) -> Vec<Running> {
    start_with(n, |_| Transport::Tcp)
}

fn start_with(n: u32, transport: impl Fn(u32) -> Transport) -> Vec<Running> {
    let peers: Vec<(u32, String)> = free_ports(n as usize)
        .into_iter()
        .enumerate()
        .map(|(r, p)| (r as u32, format!("127.0.0.1:{p}")))
        .collect();
    (0..n)
        .map(|r| {
            let opts = StartOptions {
                rank: Some(r),
                peers: peers.clone(),
                key: Some(b"test key".to_vec()),
                startup_grace: Duration::from_millis(300),
                radix: 2,
                transport: transport(r),
                ..StartOptions::default()
            };
            let mut s = Running::start(opts).unwrap();
            loop {
                match s.poll(Duration::from_millis(100)) {
                    Ok(r) => break r.unwrap(),
                    Err(again) => s = again,
                }
            }
        })
        .collect()
}

/// Events of `n` until `pred` holds for one, within 10 s.
fn until(n: &Running, mut pred: impl FnMut(&Ev) -> bool) -> Ev {
    let t0 = std::time::Instant::now();
    while t0.elapsed() < Duration::from_secs(10) {
        if let Some(ev) = n.recv(Duration::from_millis(100)).unwrap() {
            if pred(&ev) {
                return ev;
            }
        }
    }
    panic!("rank {}: no such event within 10 s", n.info().rank);
}

#[test]
fn three_nodes_broadcast_and_survive_a_close() {
    let nodes = start_all(3);
    let seq = nodes[1].xcast(16, Bytes::from_static(b"hello")).unwrap();
    for n in &nodes {
        let ev = until(n, |e| matches!(e, Ev::XcastDelivered { .. }));
        assert_eq!(
            ev,
            Ev::XcastDelivered {
                origin: 1,
                seq,
                op: 1,
                tag: 16,
                payload: Bytes::from_static(b"hello"),
            }
        );
    }
    // Past the start-up grace, a closed rank's refused re-dial is hard evidence.
    std::thread::sleep(Duration::from_millis(400));
    nodes[2].close().unwrap();
    assert_eq!(nodes[2].xcast(16, Bytes::new()), Err(RunError::Closed));
    for n in &nodes[..2] {
        let ev = until(n, |e| matches!(e, Ev::ViewChanged { .. }));
        let Ev::ViewChanged {
            removed, members, ..
        } = ev
        else {
            unreachable!()
        };
        assert_eq!(removed.iter().map(|r| r.0).collect::<Vec<_>>(), vec![2]);
        assert_eq!(members, vec![0, 1]);
        assert_eq!(n.view().unwrap().members, vec![0, 1]);
    }
    assert!(matches!(
        nodes[0].relm_send(2, 0, Bytes::new()),
        Err(RunError::NotAMember(_))
    ));
    assert!(matches!(
        nodes[0].xcast(2, Bytes::new()),
        Err(RunError::Invalid(_))
    ));
    for n in &nodes {
        n.close().unwrap();
        n.close().unwrap();
    }
}

#[test]
fn wrong_options_are_refused_before_anything_starts() {
    let refuse = |opts: StartOptions| {
        let mut s = Running::start(opts).unwrap();
        loop {
            match s.poll(Duration::from_millis(100)) {
                Ok(r) => break r.err().expect("refused"),
                Err(again) => s = again,
            }
        }
    };
    let peers = vec![
        (0, "127.0.0.1:1".to_string()),
        (2, "127.0.0.1:2".to_string()),
    ];
    let e = refuse(StartOptions {
        rank: Some(0),
        peers,
        key: Some(b"k".to_vec()),
        ..StartOptions::default()
    });
    assert!(matches!(e, StartError::Usage(m) if m.contains("none missing")));
    let e = refuse(StartOptions {
        rank: Some(0),
        peers: vec![(0, "127.0.0.1:0".into())],
        key: Some(b"k".to_vec()),
        config: vec![("nope".into(), 1)],
        ..StartOptions::default()
    });
    assert!(matches!(e, StartError::Usage(m) if m.contains("unknown config key")));
}

#[test]
fn quic_nodes_prove_their_ranks_with_certificates_and_broadcast() {
    use lifeline_transport_quic::{ClusterCa, ClusterId};
    let dir = std::env::temp_dir().join(format!("lifeline-python-quic-{}", std::process::id()));
    let cluster = ClusterId::new("pyquic").unwrap();
    let ca = ClusterCa::generate(cluster, SystemTime::now() + Duration::from_secs(3600)).unwrap();
    ca.write(&dir).unwrap();
    for r in 0..2 {
        ca.issue(Rank(r)).unwrap().write(&dir).unwrap();
    }
    let nodes = start_with(2, |_| Transport::Quic {
        cert_dir: dir.clone(),
        cluster: "pyquic".into(),
    });
    nodes[0]
        .xcast(16, Bytes::from_static(b"over quic"))
        .unwrap();
    for n in &nodes {
        let ev = until(n, |e| matches!(e, Ev::XcastDelivered { .. }));
        assert!(
            matches!(ev, Ev::XcastDelivered { origin: 0, payload, .. } if payload == "over quic")
        );
    }
    for n in &nodes {
        n.close().unwrap();
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_shrink_over_tcp_completes_once_and_its_targets_leave() {
    // Rank 2 (not the coordinator) shrinks two leaves, 3 and 4.
    let nodes = start_all(5);
    for n in &nodes {
        until(n, |e| matches!(e, Ev::Ready { .. }));
    }
    assert!(matches!(
        nodes[2].shrink(&[3, 3]),
        Err(RunError::Invalid(_))
    ));
    assert!(matches!(nodes[2].shrink(&[2]), Err(RunError::Invalid(_))));
    let id = nodes[2].shrink(&[4, 3]).unwrap();
    assert_eq!(id, (2 << 32) | 1);
    // radix 2 here: 0 -> 1,2; 1 -> 3; 2 -> 4. Every survivor sees one departure (the requester
    // before its completion), at one epoch.
    let first = until(&nodes[0], |e| matches!(e, Ev::Departed { .. }));
    let Ev::Departed { epoch, .. } = first else {
        unreachable!()
    };
    for n in &nodes[..3] {
        let ev = if n.info().rank == 0 {
            first.clone()
        } else {
            until(n, |e| matches!(e, Ev::Departed { .. }))
        };
        assert_eq!(
            ev,
            Ev::Departed {
                epoch,
                ranks: vec![3, 4],
                campaigns: vec![id],
                members: vec![0, 1, 2],
            }
        );
    }
    let done = until(&nodes[2], |e| matches!(e, Ev::CampaignCompleted { .. }));
    assert_eq!(
        done,
        Ev::CampaignCompleted {
            id,
            removed: vec![3, 4],
            epoch
        }
    );
    for n in &nodes[3..] {
        until(n, |e| matches!(e, Ev::Left { .. }));
        assert!(matches!(
            n.xcast(16, Bytes::new()),
            Err(RunError::NotAMember(_) | RunError::Closed)
        ));
    }
    let view = nodes[0].view().unwrap();
    assert_eq!(view.members, vec![0, 1, 2]);
    for n in &nodes {
        n.close().unwrap();
    }
}
