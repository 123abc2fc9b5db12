//! The mock enforces the RC rules the channel relies on.

use super::*;
use crate::verbs::{AddressVector, MrId, WcStatus};

fn rtr(dest_qpn: u32) -> Transition {
    Transition::Rtr {
        path_mtu: Mtu::M1024,
        dest_qpn,
        rq_psn: 0,
        av: AddressVector {
            dlid: 1,
            dgid: None,
            sgid_index: 0,
            hop_limit: 64,
            port: 1,
        },
        min_rnr_timer: 12,
    }
}

fn rts(rnr_retry: u8) -> Transition {
    Transition::Rts {
        sq_psn: 0,
        timeout: 14,
        retry_cnt: 7,
        rnr_retry,
    }
}

fn pair(rnr_retry: u8) -> (MockFabric, MockVerbs, Qp, MockVerbs, Qp) {
    let f = MockFabric::new(1);
    let (mut a, mut b) = (f.endpoint(), f.endpoint());
    let caps = QpCaps {
        max_send_wr: 4,
        max_recv_wr: 4,
    };
    let (qa, qb) = (a.create_qp(caps).unwrap(), b.create_qp(caps).unwrap());
    a.reg_mr(64).unwrap();
    b.reg_mr(64).unwrap();
    for (v, q, d) in [(&mut a, qa, qb.qpn), (&mut b, qb, qa.qpn)] {
        v.modify_qp(q.id, Transition::Init { port: 1 }).unwrap();
        v.modify_qp(q.id, rtr(d)).unwrap();
        v.modify_qp(q.id, rts(rnr_retry)).unwrap();
    }
    (f, a, qa, b, qb)
}

fn sge(len: u32) -> Sge {
    Sge {
        mr: MrId(0),
        offset: 0,
        len,
    }
}

fn drain(v: &mut MockVerbs) -> Vec<Completion> {
    let mut out = [Completion::EMPTY; 16];
    let n = v.poll_cq(&mut out).unwrap();
    out[..n].to_vec()
}

#[test]
fn transitions_only_in_order_and_posting_only_in_the_right_state() {
    let f = MockFabric::new(0);
    let mut v = f.endpoint();
    v.reg_mr(64).unwrap();
    let q = v
        .create_qp(QpCaps {
            max_send_wr: 1,
            max_recv_wr: 1,
        })
        .unwrap();
    let send = SendWr {
        wr_id: 1,
        sge: None,
        imm: 0,
    };
    assert!(matches!(
        v.post_recv(q.id, 1, sge(8)),
        Err(VerbsError::BadState { .. })
    ));
    assert!(matches!(
        v.modify_qp(q.id, rts(6)),
        Err(VerbsError::BadState { .. })
    ));
    assert!(matches!(
        v.modify_qp(q.id, rtr(5)),
        Err(VerbsError::BadState { .. })
    ));
    v.modify_qp(q.id, Transition::Init { port: 1 }).unwrap();
    v.post_recv(q.id, 1, sge(8)).unwrap();
    assert_eq!(v.post_recv(q.id, 2, sge(8)), Err(VerbsError::QueueFull));
    assert!(matches!(
        v.post_send(q.id, send),
        Err(VerbsError::BadState { .. })
    ));
    v.modify_qp(q.id, rtr(5)).unwrap();
    assert!(matches!(
        v.post_send(q.id, send),
        Err(VerbsError::BadState { .. })
    ));
    v.modify_qp(q.id, rts(6)).unwrap();
    v.post_send(q.id, send).unwrap();
    assert!(
        v.post_recv(q.id, 3, sge(128)).is_err(),
        "outside the region"
    );
    assert_eq!(f.qp_state(q.qpn), Some(QpState::Rts));
}

#[test]
fn rnr_with_finite_retry_fails_and_flushes_the_rest() {
    let (f, mut a, qa, _b, _qb) = pair(6);
    for id in 0..3 {
        a.post_send(
            qa.id,
            SendWr {
                wr_id: id,
                sge: Some(sge(8)),
                imm: 0,
            },
        )
        .unwrap();
    }
    a.post_recv(qa.id, 9, sge(8)).unwrap();
    assert_eq!(f.run(100), 7, "6 retries after the first NAK");
    let c = drain(&mut a);
    let st: Vec<WcStatus> = c.iter().map(|c| c.status).collect();
    assert_eq!(
        st,
        [
            WcStatus::RnrRetryExceeded,
            WcStatus::Flushed,
            WcStatus::Flushed,
            WcStatus::Flushed
        ]
    );
    assert_eq!(f.qp_state(qa.qpn), Some(QpState::Error));
    // Posting in ERR completes flushed at once.
    a.post_send(
        qa.id,
        SendWr {
            wr_id: 5,
            sge: None,
            imm: 0,
        },
    )
    .unwrap();
    assert_eq!(drain(&mut a)[0].status, WcStatus::Flushed);
}

#[test]
fn rnr_retry_seven_stalls_forever() {
    let (f, mut a, qa, _b, _qb) = pair(7);
    a.post_send(
        qa.id,
        SendWr {
            wr_id: 0,
            sge: Some(sge(8)),
            imm: 0,
        },
    )
    .unwrap();
    assert_eq!(f.run(1000), 1000);
    assert!(drain(&mut a).is_empty());
    assert_eq!(f.stats().rnr_naks, 1000);
}

#[test]
fn a_send_longer_than_the_receive_fails_both_sides() {
    let (f, mut a, qa, mut b, qb) = pair(6);
    b.post_recv(qb.id, 1, sge(4)).unwrap();
    a.post_send(
        qa.id,
        SendWr {
            wr_id: 0,
            sge: Some(sge(8)),
            imm: 0,
        },
    )
    .unwrap();
    f.run(10);
    assert_eq!(
        drain(&mut a)[0].status,
        WcStatus::Remote(fabric::REM_INV_REQ_ERR)
    );
    assert_eq!(
        drain(&mut b)[0].status,
        WcStatus::Local(fabric::LOC_LEN_ERR)
    );
}

#[test]
fn delivery_copies_bytes_and_immediate() {
    let (f, mut a, qa, mut b, qb) = pair(6);
    a.write(MrId(0), 0, b"hello").unwrap();
    b.post_recv(qb.id, 1, sge(64)).unwrap();
    a.post_send(
        qa.id,
        SendWr {
            wr_id: 0,
            sge: Some(sge(5)),
            imm: 42,
        },
    )
    .unwrap();
    f.run(10);
    let c = drain(&mut b)[0];
    assert_eq!(
        (c.byte_len, c.imm, c.status),
        (5, Some(42), WcStatus::Success)
    );
    let mut out = [0u8; 5];
    b.read(MrId(0), 0, &mut out).unwrap();
    assert_eq!(&out, b"hello");
    assert!(b.read(MrId(0), 60, &mut out).is_err());
}

/// The completion channel notifies once per arming, only for completions added after the
/// arming.
#[test]
fn completion_channel_notifies_once_per_arming() {
    let (f, mut a, qa, mut b, qb) = pair(7);
    assert!(a.cq_fd().unwrap().is_some() && b.cq_fd().unwrap().is_some());
    let send = |wr_id| SendWr {
        wr_id,
        sge: Some(sge(8)),
        imm: 5,
    };
    // Not armed: a completion arrives, nothing notifies.
    b.post_recv(qb.id, 1, sge(8)).unwrap();
    a.post_send(qa.id, send(1)).unwrap();
    f.run(10);
    assert_eq!(a.take_cq_events().unwrap(), 0);
    assert_eq!(drain(&mut a).len(), 1);
    // Armed: arming alone does not notify; the next completion does, once.
    a.arm_cq().unwrap();
    assert_eq!(a.take_cq_events().unwrap(), 0);
    b.post_recv(qb.id, 2, sge(8)).unwrap();
    b.post_recv(qb.id, 3, sge(8)).unwrap();
    a.post_send(qa.id, send(2)).unwrap();
    a.post_send(qa.id, send(3)).unwrap();
    f.run(10);
    assert_eq!(a.take_cq_events().unwrap(), 1);
    assert_eq!(a.take_cq_events().unwrap(), 0);
    assert_eq!(drain(&mut a).len(), 2);
    // A flush after arming notifies too (errors reach the waiter like successes).
    a.arm_cq().unwrap();
    f.fail_qp(qa.qpn);
    a.post_send(qa.id, send(4)).unwrap();
    assert_eq!(a.take_cq_events().unwrap(), 1);
    // The receiver was never armed: its receives completed silently.
    assert_eq!(b.take_cq_events().unwrap(), 0);
    assert_eq!(drain(&mut b).len(), 3);
}
