//! One-line descriptions of frames and events for the trace.

use bytes::Bytes;

use crate::event::Event;
use crate::flood::FloodEvent;
use crate::membership::{MembershipEvent, MembershipMsg};
use crate::relm::{RelmEvent, RelmMsg};
use crate::wire::{Limits, Message};
use crate::xcast::{XcastEvent, XcastMsg};

/// A short description of a frame for the trace (payloads shown by length only).
pub fn describe(frame: &Bytes) -> String {
    let limits = Limits {
        max_frame: u32::MAX,
        max_list: u32::MAX,
    };
    let len = frame.len();
    match Message::decode(frame.clone(), &limits) {
        Ok(Message::Flood(m)) => {
            format!(
                "Flood origin={} id={} hops={} ({len}B)",
                m.origin, m.id, m.hops
            )
        }
        Ok(Message::Revoke(m)) => format!(
            "Revoke group={} epoch={} origin={} hops={} ({len}B)",
            m.group, m.epoch, m.origin, m.hops
        ),
        Ok(Message::Xcast(XcastMsg::Relay(m))) => format!(
            "Relay origin={} seq={} tag={} ({len}B)",
            m.origin, m.seq, m.tag
        ),
        Ok(Message::Xcast(XcastMsg::Forward(m))) => format!(
            "Forward op={} round={} done={} gdone={} origin={} seq={} tag={} ({len}B)",
            m.op, m.round, m.done, m.global_done, m.origin, m.seq, m.tag
        ),
        Ok(Message::Membership(MembershipMsg::Adopt(m))) => {
            format!("Adopt lineage={:?}", ranks(&m.lineage))
        }
        Ok(Message::Membership(MembershipMsg::Lineage(m))) => format!(
            "Lineage lineage={:?} failed={:?}",
            ranks(&m.lineage),
            ranks(&m.failed)
        ),
        Ok(Message::Relm(RelmMsg::Data(m))) => format!(
            "RelmData src={} dst={} uid={} tag={} ({len}B)",
            m.src, m.dst, m.uid, m.tag
        ),
        Ok(Message::Relm(RelmMsg::Ack(m))) => {
            format!(
                "RelmAck acks={} probes={}",
                marks(&m.acks),
                marks(&m.probes)
            )
        }
        Ok(Message::Relm(RelmMsg::Req(m))) => format!(
            "RelmReq src={} dst={} ranges={:?}",
            m.src,
            m.dst,
            m.ranges
                .iter()
                .map(|r| (r.first.get(), r.count))
                .collect::<Vec<_>>()
        ),
        Ok(Message::Relm(RelmMsg::Link(m))) => format!(
            "RelmLink depth={} full={} want={} acks={} probes={}",
            m.depth,
            m.full,
            m.want,
            marks(&m.acks),
            marks(&m.probes)
        ),
        // The family's own Debug (`Ack(AckMsg { .. })`): traces read as before the nesting.
        Ok(Message::Xcast(m)) => format!("{m:?}"),
        // Every other family (a new machine needs no line here): its Debug.
        #[allow(unreachable_patterns)]
        Ok(m) => format!("{m:?}"),

        Err(e) => format!("<undecodable: {e}> ({len}B)"),
    }
}

/// `[src>dst@uid, ...]`.
fn marks(v: &[crate::wire::ChainMark]) -> String {
    let items: Vec<String> = v
        .iter()
        .map(|m| format!("{}>{}@{}", m.src, m.dst, m.uid))
        .collect();
    format!("[{}]", items.join(","))
}

fn ranks(v: &[crate::tree::Rank]) -> Vec<u32> {
    v.iter().map(|r| r.0).collect()
}

pub(super) fn describe_event(e: &Event) -> String {
    match e {
        Event::Flood(FloodEvent::Delivered {
            origin, id, hops, ..
        }) => format!("FloodDelivered origin={origin} id={id} hops={hops}"),
        Event::Xcast(XcastEvent::Delivered {
            op,
            origin,
            seq,
            tag,
            payload,
        }) => format!(
            "XcastDelivered op={op} origin={origin} seq={seq} tag={tag} ({}B)",
            payload.len()
        ),
        Event::Xcast(XcastEvent::Completed { op, seq }) => {
            format!("XcastCompleted op={op} seq={seq}")
        }
        Event::Xcast(XcastEvent::RootCompleted { op, origin, seq }) => {
            format!("XcastRootCompleted op={op} origin={origin} seq={seq}")
        }
        Event::Membership(MembershipEvent::FailureConfirmed { epoch, ranks, .. }) => {
            format!("FailureConfirmed epoch={epoch} ranks={ranks}")
        }
        Event::ViewChanged(d) => format!(
            "ViewChanged slot={:?}->{:?} parent={:?}->{:?} children_changed={}",
            d.old_slot.map(|r| r.0),
            d.new_slot.map(|r| r.0),
            d.old_parent.map(|r| r.0),
            d.new_parent.map(|r| r.0),
            d.child_changes.len()
        ),
        Event::Relm(RelmEvent::Delivered {
            src,
            uid,
            tag,
            payload,
        }) => format!(
            "RelmDelivered src={src} uid={uid} tag={tag} ({}B)",
            payload.len()
        ),
        Event::Relm(RelmEvent::Acked { dst, upto }) => format!("RelmAcked dst={dst} upto={upto}"),
        Event::Relm(RelmEvent::Failed { dst, first, count }) => {
            format!("RelmFailed dst={dst} first={first} count={count}")
        }
        Event::Relm(RelmEvent::SourceLost { src, discarded }) => {
            format!("RelmSourceLost src={src} discarded={discarded}")
        }
        Event::Relm(RelmEvent::Collision { src, dst, uid }) => {
            format!("RelmCollision src={src} dst={dst} uid={uid}")
        }
        // Every other machine's events (a new machine needs no line here): their Debug.
        #[allow(unreachable_patterns)]
        e => format!("{e:?}"),
    }
}
