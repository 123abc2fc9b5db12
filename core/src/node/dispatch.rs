//! The router: every input goes to exactly one machine. One line per machine for its message
//! family and one for its timer keys; the rest is checks common to all frames.

use bytes::Bytes;

use super::{ctx, run, Node};
use crate::machine::{Ctx, Machine};
use crate::timer::{TimerKey, TimerToken};
use crate::tree::Rank;
use crate::wire::{DecodeError, Message};

/// Checks a decoded message with its machine's [`Machine::admits`], counts it, and hands it to
/// [`Machine::on_message`] (then the node applies the machine's effects).
macro_rules! deliver {
    ($node:ident, $machine:ident, $from:expr, $msg:expr) => {{
        if !$node.$machine.admits(&ctx!($node), &$msg) {
            $node.stats.dropped_bad_origin += 1;
            return;
        }
        $node.stats.frames_in += 1;
        run!($node, $machine.on_message($from, $msg))
    }};
}

impl Node {
    /// One whole frame: peer checks, decode, the machine's admission check, then the machine.
    /// Nothing changes before the frame has decoded completely; every refusal is counted.
    pub(super) fn dispatch_frame(&mut self, from: Rank, frame: Bytes) {
        if !self.tree.layout().contains(from) {
            self.stats.dropped_unknown_peer += 1;
            return;
        }
        if self.tree.dead().contains(from) {
            self.stats.dropped_stale_sender += 1;
            return;
        }
        let msg = match Message::decode(frame, &self.limits) {
            Ok(m) => m,
            Err(e) => {
                match e {
                    DecodeError::UnknownKind(_) => self.stats.dropped_unknown_kind += 1,
                    DecodeError::TooLong { .. } => self.stats.dropped_over_limit += 1,
                    _ => self.stats.dropped_decode_error += 1,
                }
                return;
            }
        };
        if self.tree.view().is_none() {
            self.stats.dropped_self_dead += 1;
            return;
        }
        match msg {
            Message::Flood(m) => deliver!(self, flood, from, m),
            Message::Membership(m) => deliver!(self, membership, from, m),
            Message::Xcast(m) => deliver!(self, xcast, from, m),
            Message::Relm(m) => deliver!(self, relm, from, m),
        }
    }

    /// One due timer, to the machine that owns its key.
    pub(super) fn dispatch_timer(&mut self, key: TimerKey, token: TimerToken) {
        match key {
            TimerKey::Flood(t) => run!(self, flood.on_timer(t, token)),
            TimerKey::Membership(t) => run!(self, membership.on_timer(t, token)),
            TimerKey::Xcast(t) => run!(self, xcast.on_timer(t, token)),
            TimerKey::Relm(t) => run!(self, relm.on_timer(t, token)),
        }
    }
}
