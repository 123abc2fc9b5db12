//! The revoke flood: an idempotent "stop now" notice that reaches every live rank despite
//! failures during its propagation (ULFM's `MPIX_Comm_revoke`).
//!
//! [`Node::revoke`](crate::Node::revoke)`(now, group, epoch)` applies the revoke here first
//! ([`RevokeEvent::Revoked`]), then sends a small notice `{group, epoch, origin, hops}` to each
//! of this rank's neighbours. The node picks them (`Effect::Flood`): with the heartbeat
//! detector on, its **standing links** — ring observers and subjects, whose links heartbeats
//! keep up, and its tree parent and children — so a flood dials nobody; with the detector off,
//! the binomial-graph [`overlay`] of its current view. A rank that receives a notice for the
//! first time does the same: delivers, then forwards to every neighbour but the sender. The
//! bounds below are the overlay's; on standing links a rank is cut off only when all its ring
//! and tree neighbours die, the members split only when every one of the K rings (each a cycle
//! through every live rank) is cut twice between the same two sides, and a flood costs about
//! `m × (2K + tree degree − 1)` frames. So:
//!
//! - **exactly once**: one event per (group, epoch) per rank while the group is remembered;
//!   a second copy is a counted duplicate ([`RevokeStats::duplicates`]);
//! - **stale epochs**: per group only the newest revoked epoch is kept; a notice (or a
//!   command) for an older epoch is dropped and counted ([`RevokeStats::stale`]) or refused
//!   ([`RevokeError::Stale`]); a newer epoch is a new revoke;
//! - **fault tolerance**: the overlay's connectivity equals its degree, so any `degree − 1`
//!   ranks dying during the flood (not yet known dead anywhere) cannot stop it reaching every
//!   other live rank; ranks known dead are not in the overlay at all;
//! - **non-uniform, unordered** (ULFM's guarantees): if the origin and every rank it reached
//!   die before forwarding, the notice is lost (the survivors were not waiting on them, or
//!   will see the failure and may revoke again); concurrent revokes are delivered in any order;
//! - **cost**: a notice is 28 bytes on the wire; a flood costs about `m × (degree − 1)` frames
//!   (each rank forwards once to every neighbour but its sender) and crosses at most the
//!   overlay's diameter in hops (5 at 1,024 members, 6 at 4,096, 10 at 2^20);
//! - **bounded memory**: one entry per group, at most
//!   [`RevokeConfig::max_groups`]; at the bound the group revoked longest ago is forgotten
//!   ([`RevokeStats::forgotten`]).
//!
//! Frames from ranks outside the span or known dead never reach the machine (the node fences
//! them as it does every kind); a notice naming an origin outside the span is refused
//! (`dropped_bad_origin`). A notice whose origin has died since is still taken (it was alive
//! when it revoked). A coordinator's removal decisions flood the same neighbours (membership's
//! `flood_removed`, forwarded on first receipt, duplicates dropped by its own filter).

use crate::machine::Ctx;
use crate::timer::TimerToken;
use crate::tree::Rank;
use crate::vecmap::VecMap;

mod config;
mod error;
mod event;
pub mod overlay;
mod stats;
mod timer;
mod wire;

pub use config::RevokeConfig;
pub use error::RevokeError;
pub use event::RevokeEvent;
pub use stats::RevokeStats;
pub use timer::RevokeTimer;
pub use wire::RevokeMsg;

/// What a notice or a command is to this rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verdict {
    /// A (group, epoch) not revoked here before: remembered now.
    New,
    /// Already revoked here.
    Duplicate,
    /// Older than the newest epoch revoked here for the group.
    Stale { newest: u64 },
}

/// Revoke state of one node, boxed on first use (a node that never sees a revoke pays 8
/// bytes: at 2^20 simulated ranks every byte of the node counts).
#[derive(Debug, Default)]
pub(crate) struct Revoke(Option<Box<State>>);

/// Per group, the newest epoch revoked and when (a stamp, for evicting the oldest at the
/// bound); the counters.
#[derive(Debug, Default)]
struct State {
    /// group → (newest revoked epoch, stamp of that revoke). Ordered, so deterministic.
    groups: VecMap<u64, (u64, u64)>,
    next_stamp: u64,
    stats: RevokeStats,
}

impl Revoke {
    /// The state, made on first use.
    fn state(&mut self) -> &mut State {
        self.0.get_or_insert_with(Box::default)
    }

    /// The counters (all zero before the first revoke seen).
    pub(crate) fn stats(&self) -> RevokeStats {
        self.0.as_ref().map(|s| s.stats.clone()).unwrap_or_default()
    }

    /// The node sent `n` copies of a notice this machine flooded.
    pub(crate) fn count_forwarded(&mut self, n: u64) {
        self.state().stats.forwarded += n;
    }

    /// The newest epoch revoked here for `group`, if remembered.
    pub(crate) fn revoked(&self, group: u64) -> Option<u64> {
        let s = self.0.as_ref()?;
        s.groups.get(&group).map(|&(e, _)| e)
    }
}

impl State {
    /// The command: revokes `group` as of `epoch` here, then floods the notice. A revoke
    /// already applied is a no-op (`Ok`, no event, no frame): revoking is idempotent.
    fn start(&mut self, ctx: &mut Ctx<'_>, group: u64, epoch: u64) -> Result<(), RevokeError> {
        match self.note(ctx, group, epoch) {
            Verdict::Stale { newest } => Err(RevokeError::Stale {
                group,
                epoch,
                newest,
            }),
            Verdict::Duplicate => Ok(()),
            Verdict::New => {
                self.stats.started += 1;
                let msg = RevokeMsg {
                    group,
                    epoch,
                    origin: ctx.me(),
                    hops: 0,
                };
                self.deliver_and_forward(ctx, None, msg);
                Ok(())
            }
        }
    }

    /// Classifies (group, epoch) and remembers it if new, forgetting the oldest group at the
    /// bound.
    fn note(&mut self, ctx: &mut Ctx<'_>, group: u64, epoch: u64) -> Verdict {
        let stamp = self.next_stamp;
        match self.groups.get_mut(&group) {
            Some(&mut (newest, _)) if epoch < newest => return Verdict::Stale { newest },
            Some(&mut (newest, _)) if epoch == newest => return Verdict::Duplicate,
            Some(entry) => *entry = (epoch, stamp),
            None => {
                if self.groups.len() >= ctx.cfg.revoke.max_groups {
                    self.forget_oldest();
                    self.stats.forgotten += 1;
                }
                self.groups.insert(group, (epoch, stamp));
            }
        }
        self.next_stamp += 1;
        Verdict::New
    }

    /// Forgets the group revoked longest ago (a scan: only at the bound).
    fn forget_oldest(&mut self) {
        let oldest = self
            .groups
            .iter()
            .min_by_key(|(_, &(_, stamp))| stamp)
            .map(|(&g, _)| g);
        if let Some(g) = oldest {
            self.groups.remove(&g);
        }
    }

    /// Applies a new revoke here (the event), then forwards the notice to every standing
    /// neighbour but the one it came from (the node picks them: see the module doc).
    fn deliver_and_forward(&mut self, ctx: &mut Ctx<'_>, from: Option<Rank>, msg: RevokeMsg) {
        self.stats.delivered += 1;
        ctx.event(RevokeEvent::Revoked {
            group: msg.group,
            epoch: msg.epoch,
            origin: msg.origin,
            hops: msg.hops,
        });
        let fwd = RevokeMsg {
            hops: msg.hops.saturating_add(1),
            ..msg
        };
        ctx.effect(crate::machine::Effect::Flood {
            msg: fwd.into(),
            gone: Vec::new(),
            except: from,
            count: crate::machine::FloodCount::Revoke,
        });
    }
}

impl crate::machine::Machine for Revoke {
    type Msg = RevokeMsg;
    type Timer = RevokeTimer;

    fn new(_cfg: &crate::Config, _me: Rank) -> Self {
        Self::default()
    }

    /// Refuses a notice whose origin is outside the span (no rank there could have sent it).
    fn admits(&self, ctx: &Ctx<'_>, msg: &RevokeMsg) -> bool {
        ctx.tree.layout().contains(msg.origin)
    }

    fn on_message(&mut self, ctx: &mut Ctx<'_>, from: Rank, msg: RevokeMsg) {
        self.state().on_notice(ctx, from, msg);
    }

    fn on_timer(&mut self, _ctx: &mut Ctx<'_>, timer: RevokeTimer, _token: TimerToken) {
        match timer {}
    }
}

impl Revoke {
    /// The command (see [`State::start`]).
    pub(crate) fn start(
        &mut self,
        ctx: &mut Ctx<'_>,
        group: u64,
        epoch: u64,
    ) -> Result<(), RevokeError> {
        self.state().start(ctx, group, epoch)
    }
}

impl State {
    /// A notice from `from`: delivered and forwarded if new, else dropped and counted.
    fn on_notice(&mut self, ctx: &mut Ctx<'_>, from: Rank, msg: RevokeMsg) {
        match self.note(ctx, msg.group, msg.epoch) {
            Verdict::New => self.deliver_and_forward(ctx, Some(from), msg),
            Verdict::Duplicate => self.stats.duplicates += 1,
            Verdict::Stale { .. } => self.stats.stale += 1,
        }
    }
}

#[cfg(test)]
mod tests;
