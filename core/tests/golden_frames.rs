//! Golden frames: one frame of every message kind (and the global failure notice's xcast
//! payload), encoded and compared with bytes committed before the machine-layout move
//! (`tests/golden/frames.hex`). A change of any byte on the wire fails here.
//!
//! Regenerate (only for a deliberate wire change, with a new envelope version):
//! `LIFELINE_BLESS=1 cargo test -p lifeline-core --test golden_frames`.

use bytes::Bytes;
use lifeline_core::join::{AdmitNotice, JoinAnswerMsg, JoinForwardMsg, JoinId, JoinRequest};
use lifeline_core::membership::quorum::{
    AcceptMsg, Accepted, Ballot, PrepareMsg, PromiseMsg, ProposeMsg, RoundAnswer, RoundAnswersMsg,
    RoundBody, TreeRoundMsg,
};
use lifeline_core::membership::{
    CampaignId, CheckInMsg, CheckInNotice, CorroborateMsg, CorroborateOp, RelayedMsg, RemovalCause,
    TreePingMsg, UnreachableMsg,
};
use lifeline_core::relm::Uid;
use lifeline_core::tree::Rank;
use lifeline_core::wire::MembershipMsg;
use lifeline_core::wire::RelmMsg;
use lifeline_core::wire::XcastMsg;
use lifeline_core::wire::*;

fn uid(v: u32) -> Uid {
    Uid::new(v).unwrap()
}

fn mark(src: u32, dst: u32, u: u32) -> ChainMark {
    ChainMark {
        src: Rank(src),
        dst: Rank(dst),
        uid: uid(u),
    }
}

/// `(name, frame)` for one message of every kind, with distinctive field values.
fn frames() -> Vec<(&'static str, Bytes)> {
    let p = || Bytes::from_static(b"payload");
    let msgs: Vec<(&'static str, Message)> = vec![
        (
            "flood",
            Message::Flood(FloodMsg {
                origin: Rank(3),
                id: 0x0102_0304_0506_0708,
                hops: 7,
                payload: p(),
            }),
        ),
        (
            "adopt",
            Message::Membership(MembershipMsg::Adopt(AdoptMsg {
                span: 4096,
                lineage: vec![Rank(0), Rank(1), Rank(5)],
            })),
        ),
        (
            "lineage",
            Message::Membership(MembershipMsg::Lineage(LineageMsg {
                span: 4096,
                lineage: vec![Rank(0), Rank(2)],
                failed: vec![Rank(9), Rank(17)],
            })),
        ),
        (
            "relay",
            Message::Xcast(XcastMsg::Relay(RelayMsg {
                origin: Rank(11),
                seq: 42,
                numbered: 40,
                tag: 16,
                payload: p(),
            })),
        ),
        (
            "forward",
            Message::Xcast(XcastMsg::Forward(ForwardMsg {
                op: 77,
                round: 3,
                done: 70,
                global_done: 65,
                origin: Rank(11),
                seq: 42,
                tag: 16,
                payload: p(),
            })),
        ),
        (
            "ack",
            Message::Xcast(XcastMsg::Ack(AckMsg { op: 77, round: 3 })),
        ),
        (
            "poll",
            Message::Xcast(XcastMsg::Poll(PollMsg {
                op: 77,
                round: 4,
                done: 70,
                global_done: 65,
            })),
        ),
        ("need", Message::Xcast(XcastMsg::Need(NeedMsg { op: 77 }))),
        (
            "sync",
            Message::Xcast(XcastMsg::Sync(SyncMsg {
                done: 70,
                global_done: 65,
            })),
        ),
        (
            "complete",
            Message::Xcast(XcastMsg::Complete(CompleteMsg {
                origin: Rank(11),
                seq: 42,
                op: 77,
                query: true,
            })),
        ),
        (
            "recover",
            Message::Xcast(XcastMsg::Recover(RecoverMsg { gen: 5, base: 60 })),
        ),
        (
            "recovered_op",
            Message::Xcast(XcastMsg::RecoveredOp(RecoveredOpMsg {
                gen: 5,
                op: 61,
                origin: Rank(4),
                seq: 8,
                tag: 1,
                payload: p(),
            })),
        ),
        (
            "recover_done",
            Message::Xcast(XcastMsg::RecoverDone(RecoverDoneMsg {
                gen: 5,
                seen_gen: 6,
                global_done: 60,
            })),
        ),
        (
            "relm_data",
            Message::Relm(RelmMsg::Data(RelmDataMsg {
                src: Rank(1),
                dst: Rank(2),
                uid: uid(4_294_967_290),
                tag: 99,
                payload: p(),
            })),
        ),
        (
            "relm_ack",
            Message::Relm(RelmMsg::Ack(RelmAckMsg {
                acks: vec![mark(1, 2, 10), mark(3, 4, 20)],
                probes: vec![mark(5, 6, 30)],
            })),
        ),
        (
            "relm_req",
            Message::Relm(RelmMsg::Req(RelmReqMsg {
                src: Rank(1),
                dst: Rank(2),
                ranges: vec![
                    UidRange {
                        first: uid(10),
                        count: 3,
                    },
                    UidRange {
                        first: uid(20),
                        count: 1,
                    },
                ],
            })),
        ),
        (
            "relm_link",
            Message::Relm(RelmMsg::Link(RelmLinkMsg {
                depth: 2,
                full: true,
                want: false,
                acks: vec![mark(1, 2, 10)],
                probes: vec![mark(7, 8, 40)],
            })),
        ),
    ];
    let detect: Vec<(&'static str, Message)> = vec![
        (
            "heartbeat",
            Message::from(lifeline_core::detect::HeartbeatMsg {
                incarnation: 2,
                seq: 1234,
            }),
        ),
        (
            "suspect",
            Message::from(lifeline_core::detect::SuspectMsg {
                subject: Rank(9),
                incarnation: 2,
            }),
        ),
    ];
    let membership: Vec<(&'static str, Message)> = vec![
        (
            "alert",
            Message::from(AlertMsg {
                hops: 0,
                entries: vec![
                    AlertEntry {
                        subject: Rank(9),
                        incarnation: 2,
                        down: true,
                        observers: vec![Rank(3), Rank(17)],
                    },
                    AlertEntry {
                        subject: Rank(4),
                        incarnation: 0,
                        down: false,
                        observers: vec![Rank(5)],
                    },
                ],
            }),
        ),
        ("evicted", Message::from(EvictedMsg { epoch: 7 })),
        (
            "removed",
            Message::from(RemovedMsg {
                coordinator: Rank(2),
                seq: 3,
                cause: RemovalCause::Unresponsive,
                ranks: vec![Rank(9), Rank(40)],
            }),
        ),
        (
            "unreachable",
            Message::from(UnreachableMsg { peer: Rank(12) }),
        ),
        (
            "join_forward",
            Message::from(JoinForwardMsg {
                id: JoinId {
                    nonce: 0x0102_0304_0506_0708,
                    seq: 2,
                },
                addr: Bytes::from_static(b"127.0.0.1:7003"),
                known: None,
            }),
        ),
        (
            "join_answer",
            Message::from(JoinAnswerMsg {
                id: JoinId { nonce: 9, seq: 1 },
                admitted: Some((Rank(16), 4)),
            }),
        ),
        (
            "corroborate",
            Message::from(CorroborateMsg {
                op: CorroborateOp::Refused,
                subject: Rank(9),
            }),
        ),
        (
            "check_in",
            Message::from(CheckInMsg {
                span: 16,
                ranks: vec![Rank(5), Rank(11)],
            }),
        ),
        (
            "shrink_request",
            Message::from(ShrinkRequestMsg {
                id: CampaignId {
                    requester: Rank(5),
                    seq: 2,
                },
                targets: vec![Rank(3), Rank(7), Rank(8)],
            }),
        ),
    ];
    let revoke = [(
        "revoke",
        Message::from(RevokeMsg {
            group: 0x0102_0304_0506_0708,
            epoch: 9,
            origin: Rank(5),
            hops: 3,
        }),
    )];
    let msgs: Vec<(&'static str, Message)> = msgs
        .into_iter()
        .chain(detect)
        .chain(membership)
        .chain(revoke)
        .collect();
    let mut out: Vec<(&'static str, Bytes)> =
        msgs.into_iter().map(|(n, m)| (n, m.encode())).collect();
    out.push((
        "global_failure_payload",
        GlobalFailureMsg {
            epoch: 3,
            failed: vec![Rank(4), Rank(9)],
            causes: vec![RemovalCause::LinkLost, RemovalCause::Declared],
        }
        .to_payload(),
    ));
    out.push((
        "admit_payload",
        AdmitNotice {
            epoch: 4,
            joiners: vec![(
                JoinId { nonce: 9, seq: 1 },
                Bytes::from_static(b"127.0.0.1:7003"),
            )],
        }
        .to_payload(),
    ));
    out.push((
        "check_in_payload",
        CheckInNotice {
            epoch: 2,
            ranks: vec![Rank(0), Rank(3), Rank(7)],
        }
        .to_payload(),
    ));
    out.push((
        "shrink_order_payload",
        ShrinkOrder {
            campaigns: vec![
                (
                    CampaignId {
                        requester: Rank(5),
                        seq: 2,
                    },
                    vec![Rank(3), Rank(7), Rank(8)],
                ),
                (
                    CampaignId {
                        requester: Rank(1),
                        seq: 1,
                    },
                    vec![Rank(4)],
                ),
            ],
        }
        .to_payload(),
    ));
    out.push((
        "left_payload",
        LeftNotice {
            epoch: 6,
            campaigns: vec![
                CampaignId {
                    requester: Rank(1),
                    seq: 1,
                },
                CampaignId {
                    requester: Rank(5),
                    seq: 2,
                },
            ],
            ranks: vec![Rank(3), Rank(4), Rank(7), Rank(8)],
        }
        .to_payload(),
    ));
    out.push((
        "join_request",
        JoinRequest {
            id: JoinId { nonce: 9, seq: 1 },
            addr: Bytes::from_static(b"127.0.0.1:7003"),
        }
        .encode(),
    ));
    // Added after the table above was committed: appended, so no earlier line moves.
    out.push((
        "relayed",
        Message::from(RelayedMsg {
            src: Rank(9),
            dst: Rank(1),
            flags: RelayedMsg::HEARD,
            frame: Message::from(UnreachableMsg { peer: Rank(12) }).encode(),
        })
        .encode(),
    ));
    // Agreement (kinds 44–47), added after the frames above so their lines stay put.
    let b = Ballot {
        round: 2,
        rank: Rank(8),
    };
    let agreement: Vec<(&'static str, Message)> = vec![
        (
            "prepare",
            Message::from(PrepareMsg {
                ballot: b,
                epoch: 3,
                removed: vec![Rank(0), Rank(1)],
            }),
        ),
        (
            "promise",
            Message::from(PromiseMsg {
                ballot: b,
                ok: true,
                promised: b,
                accepted: Some(Accepted {
                    ballot: Ballot::INITIAL,
                    epoch: 4,
                    removed: vec![Rank(5)],
                    base: vec![Rank(0), Rank(1)],
                }),
                downs: vec![(Rank(0), 1), (Rank(1), 2)],
                vouched: vec![Rank(1)],
                checked: vec![Rank(0), Rank(1)],
            }),
        ),
        (
            "propose",
            Message::from(ProposeMsg {
                ballot: b,
                epoch: 4,
                removed: vec![Rank(5)],
                base: vec![Rank(0), Rank(1)],
            }),
        ),
        (
            "accept",
            Message::from(AcceptMsg {
                ballot: b,
                epoch: 4,
                ok: true,
                promised: b,
            }),
        ),
    ];
    out.extend(agreement.into_iter().map(|(n, m)| (n, m.encode())));
    out.push(("tree-ping", Message::from(TreePingMsg).encode()));
    // A retry's forward with the admission its contact remembers (appended: #21).
    let known = JoinForwardMsg {
        id: JoinId {
            nonce: 0x0102_0304_0506_0708,
            seq: 3,
        },
        addr: Bytes::from_static(b"127.0.0.1:7003"),
        known: Some((Rank(43), 11)),
    };
    out.push(("join_forward_known", Message::from(known).encode()));
    // Tree rounds (kinds 48, 50; session 30), appended.
    let round = TreeRoundMsg {
        round: 7,
        body: RoundBody::Propose(ProposeMsg {
            ballot: b,
            epoch: 4,
            removed: vec![Rank(5)],
            base: vec![Rank(0), Rank(1)],
        }),
    };
    out.push(("tree-round", Message::from(round).encode()));
    let check = TreeRoundMsg {
        round: 8,
        body: RoundBody::Check(PrepareMsg {
            ballot: b,
            epoch: 3,
            removed: vec![Rank(5)],
        }),
    };
    out.push(("tree-round-check", Message::from(check).encode()));
    let answers = RoundAnswersMsg {
        ballot: b,
        round: 8,
        answers: vec![
            RoundAnswer {
                rank: Rank(9),
                ok: true,
                promised: b,
                checked: true,
                vouched: vec![],
            },
            RoundAnswer {
                rank: Rank(10),
                ok: false,
                promised: b,
                checked: true,
                vouched: vec![Rank(5)],
            },
        ],
    };
    out.push(("round-answers", Message::from(answers).encode()));
    out
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn every_kind_encodes_to_the_committed_bytes() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/frames.hex");
    let now: String = frames()
        .iter()
        .map(|(n, f)| format!("{n} {}\n", hex(f)))
        .collect();
    if std::env::var_os("LIFELINE_BLESS").is_some() {
        std::fs::write(path, &now).unwrap();
    }
    let golden = std::fs::read_to_string(path).unwrap();
    for (g, n) in golden.lines().zip(now.lines()) {
        assert_eq!(n, g, "frame bytes changed");
    }
    assert_eq!(now.lines().count(), golden.lines().count());
}

#[test]
fn golden_frames_decode_back_and_cover_every_kind() {
    let limits = Limits::default();
    let mut kinds = std::collections::BTreeSet::new();
    for (name, f) in frames() {
        // Payloads and joiner frames are not envelopes of the message table.
        if matches!(
            name,
            "global_failure_payload"
                | "admit_payload"
                | "check_in_payload"
                | "shrink_order_payload"
                | "left_payload"
                | "join_request"
        ) {
            continue;
        }
        let m = Message::decode(f.clone(), &limits).unwrap();
        assert_eq!(m.encode(), f, "{name}");
        kinds.insert(f[1]);
    }
    let all: std::collections::BTreeSet<u8> = (0..=255u8)
        .filter(|&b| Kind::from_u8(b).is_some())
        .collect();
    assert_eq!(kinds, all, "a message kind has no golden frame");
}
