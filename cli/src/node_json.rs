//! `lifeline node`'s JSON lines: each core event and the stats it prints, one object each
//! (the line's `event` name and its fields; the printer adds `rank`, `t_ms` and `now_ms`).

use bytes::Bytes;
use lifeline_core::{
    Event, FloodEvent, MembershipEvent, RelmEvent, RevokeEvent, Stats, XcastEvent,
};
use serde_json::{json, Value};

pub(crate) fn text(payload: &Bytes) -> Value {
    match std::str::from_utf8(payload) {
        Ok(s) => json!(s),
        Err(_) => json!(payload
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()),
    }
}

pub(crate) fn event_json(e: &Event) -> (&'static str, Value) {
    match e {
        Event::Xcast(XcastEvent::Delivered {
            op,
            origin,
            seq,
            tag,
            payload,
        }) => (
            "xcast_delivered",
            json!({"op": op, "origin": origin.0, "seq": seq, "tag": tag, "payload": text(payload)}),
        ),
        Event::Xcast(XcastEvent::Completed { op, seq }) => {
            ("xcast_completed", json!({"op": op, "seq": seq}))
        }
        Event::Xcast(XcastEvent::RootCompleted { op, origin, seq }) => (
            "xcast_root_completed",
            json!({"op": op, "origin": origin.0, "seq": seq}),
        ),
        Event::Membership(MembershipEvent::Evicted { epoch }) => {
            ("evicted", json!({ "epoch": epoch }))
        }
        Event::Membership(MembershipEvent::Left { epoch }) => ("left", json!({ "epoch": epoch })),
        Event::Membership(MembershipEvent::RelayStarted { peer, via }) => (
            "relay_started",
            json!({"peer": peer.0, "via": via.map(|r| r.0)}),
        ),
        Event::Membership(MembershipEvent::RelayEnded { peer }) => {
            ("relay_ended", json!({ "peer": peer.0 }))
        }
        Event::Membership(MembershipEvent::Departed {
            epoch,
            ranks,
            campaigns,
            members,
        }) => (
            "departed",
            json!({"epoch": epoch, "ranks": ranks.iter().map(|r| r.0).collect::<Vec<_>>(),
                   "campaigns": campaigns.iter().map(|c| c.to_string()).collect::<Vec<_>>(),
                   "members": members}),
        ),
        Event::Membership(MembershipEvent::CampaignCompleted { id, removed, epoch }) => (
            "campaign_completed",
            json!({"id": id.to_string(), "removed": removed.iter().map(|r| r.0).collect::<Vec<_>>(),
                   "epoch": epoch}),
        ),
        Event::Membership(MembershipEvent::CampaignFailed { id, reason }) => (
            "campaign_failed",
            json!({"id": id.to_string(), "reason": reason.name()}),
        ),
        Event::Membership(MembershipEvent::Joined {
            epoch,
            joiners,
            members,
        }) => (
            "admitted",
            json!({"epoch": epoch, "ranks": joiners.iter().map(|a| a.rank.0).collect::<Vec<_>>(),
                   "joiners": joiners.iter().map(|a| json!({"rank": a.rank.0,
                       "id": a.id.to_string(), "addr": text(&a.addr)})).collect::<Vec<_>>(),
                   "members": members}),
        ),
        Event::Membership(MembershipEvent::CheckedIn {
            epoch,
            ranks,
            members,
        }) => (
            "checked_in",
            json!({"epoch": epoch, "count": ranks.len(), "members": members}),
        ),
        Event::Membership(MembershipEvent::Ready { epoch, members }) => {
            ("ready", json!({"epoch": epoch, "members": members}))
        }
        Event::Membership(MembershipEvent::StartupIncomplete {
            epoch,
            missing,
            members,
        }) => (
            "startup_incomplete",
            json!({"epoch": epoch, "missing": missing.iter().map(|r| r.0).collect::<Vec<_>>(),
                   "members": members}),
        ),
        Event::Membership(MembershipEvent::FailureConfirmed {
            epoch,
            ranks,
            causes,
            members,
        }) => (
            "failure_confirmed",
            json!({"epoch": epoch, "ranks": ranks.iter().map(|r| r.0).collect::<Vec<_>>(),
                   "causes": causes.iter().map(|(r, c)| (r.0.to_string(), json!(c.name())))
                       .collect::<serde_json::Map<String, serde_json::Value>>(),
                   "members": members}),
        ),
        Event::ViewChanged(d) => (
            "view_changed",
            json!({"slot": d.new_slot.map(|r| r.0), "parent": d.new_parent.map(|r| r.0),
                   "promoted": d.promoted}),
        ),
        Event::Revoke(RevokeEvent::Revoked {
            group,
            epoch,
            origin,
            hops,
        }) => (
            "revoked",
            json!({"group": group, "epoch": epoch, "origin": origin.0, "hops": hops}),
        ),
        Event::Flood(FloodEvent::Delivered {
            origin,
            id,
            hops,
            payload,
        }) => (
            "flood_delivered",
            json!({"origin": origin.0, "id": id, "hops": hops, "payload": text(payload)}),
        ),
        Event::Relm(RelmEvent::Delivered {
            src,
            uid,
            tag,
            payload,
        }) => (
            "relm_delivered",
            json!({"src": src.0, "uid": uid.get(), "tag": tag, "payload": text(payload)}),
        ),
        Event::Relm(RelmEvent::Acked { dst, upto }) => {
            ("relm_acked", json!({"dst": dst.0, "upto": upto.get()}))
        }
        Event::Relm(RelmEvent::Failed { dst, first, count }) => (
            "relm_failed",
            json!({"dst": dst.0, "first": first.get(), "count": count}),
        ),
        Event::Relm(RelmEvent::SourceLost { src, discarded }) => (
            "relm_source_lost",
            json!({"src": src.0, "discarded": discarded}),
        ),
        Event::Relm(RelmEvent::Collision { src, dst, uid }) => (
            "relm_collision",
            json!({"src": src.0, "dst": dst.0, "uid": uid.get()}),
        ),
        Event::Repaired { ranks, scope } => (
            "repaired",
            json!({"ranks": ranks.iter().map(|r| r.0).collect::<Vec<_>>(),
            "scope": match scope {
                lifeline_core::tree::Scope::Local => "local",
                lifeline_core::tree::Scope::Global => "global",
            }}),
        ),
        other => ("event", json!({ "debug": format!("{other:?}") })),
    }
}

pub(crate) fn core_stats_json(s: &Stats) -> Value {
    json!({
        "frames_in": s.frames_in,
        "frames_out": s.frames_out,
        "dropped_unknown_kind": s.dropped_unknown_kind,
        "dropped_stale_sender": s.dropped_stale_sender,
        "dropped_unknown_peer": s.dropped_unknown_peer,
        "dropped_decode_error": s.dropped_decode_error,
        "dropped_over_limit": s.dropped_over_limit,
        "dropped_outbox_full": s.dropped_outbox_full,
        "dropped_events_full": s.dropped_events_full,
        "suppressed_to_dead": s.suppressed_to_dead,
        "lateral_link_downs": s.lateral_link_downs,
        "xcast_retries": s.xcast.retries,
        "relm_sent": s.relm.sent,
        "relm_delivered": s.relm.delivered,
        "relm_replays": s.relm.replays,
        "relm_retry_probes": s.relm.retry_probes,
        "relm_failed": s.relm.failed,
    })
}

/// The heartbeat detector's counters: how often this rank suspected, was refuted, and found
/// itself in trouble (its local health score raised: an overloaded host says so here).
pub(crate) fn detect_stats_json(s: &lifeline_core::detect::DetectStats) -> Value {
    json!({
        "heartbeats_out": s.heartbeats_out,
        "heartbeats_in": s.heartbeats_in,
        "suspicions": s.suspicions,
        "refuted": s.refuted,
        "unresponsive": s.unresponsive,
        "self_freeze_skips": s.self_freeze_skips,
        "self_refutations": s.self_refutations,
        "health_raised": s.health_raised,
        "health_lowered": s.health_lowered,
        "health_held": s.health_held,
        "startup_holds": s.startup_holds,
    })
}

pub(crate) fn shrink_stats_json(s: &lifeline_core::ShrinkStats) -> Value {
    json!({
        "campaigns_requested": s.campaigns_requested,
        "campaigns_completed": s.campaigns_completed,
        "campaigns_failed": s.campaigns_failed,
        "shrink_orders": s.shrink_orders,
        "left_views": s.left_views,
        "shrinks_waited": s.shrinks_waited,
        "joins_waited": s.joins_waited,
        "departures_observed": s.departures_observed,
        "departed": s.departed,
        "leaving_entered": s.leaving_entered,
        "drain_timeouts": s.drain_timeouts,
        "hand_overs": s.hand_overs,
        "stale_departures": s.stale_departures,
        "children_waits": s.children_waits,
    })
}

/// Quorum views' agreement counters (`docs/quorum.md`): phases started, re-sent short of a
/// quorum, decided; removal checks and what they kept.
pub(crate) fn quorum_stats_json(s: &lifeline_core::membership::quorum::QuorumStats) -> Value {
    json!({
        "prepares_started": s.prepares_started,
        "elected": s.elected,
        "promises_given": s.promises_given,
        "refused": s.refused,
        "proposals": s.proposals,
        "decided": s.decided,
        "proposals_without_quorum": s.proposals_without_quorum,
        "accepted": s.accepted,
        "stepped_down": s.stepped_down,
        "stale": s.stale,
        "removals_held": s.removals_held,
        "vetoed": s.vetoed,
        "checks": s.checks,
        "vouched_kept": s.vouched_kept,
        "checks_expired": s.checks_expired,
        "check_us_max": s.check_us_max,
        "phase2_us_max": s.phase2_us_max,
        "tree_rounds": s.tree_rounds,
        "rounds_relayed": s.rounds_relayed,
        "rounds_dropped": s.rounds_dropped,
    })
}

/// How this rank's soft evidence travelled and what its decisions waited on (the core's
/// `MembershipStats`, with the corroboration and overload-hold counters): alerts sent, relayed
/// and counted here as coordinator, removals decided on evidence, decisions deferred (an
/// accused rank in flux, a refute hold), refused by the majority guard or held for the
/// overload window; and, with quorum views, evidence sent straight to backup candidates.
/// Enough to tell which guard held a removal on a run that failed to make one.
pub(crate) fn membership_stats_json(
    s: &lifeline_core::membership::MembershipStats,
    c: &lifeline_core::membership::CorroborationStats,
    q: &lifeline_core::membership::quorum::QuorumStats,
) -> Value {
    json!({
        "alerts_out": s.alerts_out,
        "alerts_in": s.alerts_in,
        "alerts_relayed": s.alerts_relayed,
        "alerts_stale": s.alerts_stale,
        "candidate_alerts_out": q.candidate_alerts_out,
        "removed_on_evidence": s.removed_on_evidence,
        "decisions_deferred": s.decisions_deferred,
        "decisions_refused_minority": s.decisions_refused_minority,
        "decisions_held_overload": c.decisions_held_overload,
        "removals_reflooded": s.removals_reflooded,
        "gray_on_silence": s.gray_on_silence,
        "refusals_in": c.refusals_in,
        "probes_out": c.probes_out,
    })
}

/// The revoke flood's counters.
pub(crate) fn revoke_stats_json(s: &lifeline_core::RevokeStats) -> Value {
    json!({
        "started": s.started,
        "delivered": s.delivered,
        "forwarded": s.forwarded,
        "duplicates": s.duplicates,
        "stale": s.stale,
        "forgotten": s.forgotten,
    })
}

pub(crate) fn join_stats_json(s: &lifeline_core::join::JoinStats) -> Value {
    json!({
        "requests_in": s.join_requests_in,
        "forwards_out": s.join_forwards_out,
        "forwards_in": s.join_forwards_in,
        "reforwards": s.join_reforwards,
        "accepts_sent": s.join_accepts_sent,
        "retries_sent": s.join_retries_sent,
        "timed_out": s.joins_timed_out,
        "refused_busy": s.joins_refused_busy,
        "admitted": s.joins_admitted,
        "views": s.join_views,
        "malformed": s.join_requests_malformed,
    })
}

pub(crate) fn startup_stats_json(s: &lifeline_core::StartupStats) -> Value {
    json!({
        "check_ins_out": s.check_ins_out,
        "check_ins_in": s.check_ins_in,
        "check_ins_stale": s.check_ins_stale,
        "check_in_views": s.check_in_views,
        "check_in_notices": s.check_in_notices,
        "never_joined_removed": s.never_joined_removed,
    })
}
