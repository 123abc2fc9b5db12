//! [`Outputs`]: what the driver hands the application, waiting for room in the output channel.
//!
//! Nothing is ever dropped here (only after the application closed its receiver, when nobody
//! can read it). The buffer is bounded by what feeds it instead: while it holds
//! `output_buffer` entries or more ([`Outputs::full`]) the driver reads no data-class frames
//! (the source of every xcast and RELM delivery) and refuses the application's commands, so
//! what still arrives comes from control frames, timers and link changes, whose events the
//! core's own bounds limit (see the crate docs, "Back-pressure").

use std::collections::VecDeque;
use std::sync::Arc;

use tokio::sync::mpsc;

use crate::handle::Output;
use crate::stats::Counters;

/// The outputs not yet in the application's channel, in order.
#[derive(Debug)]
pub(super) struct Outputs {
    pending: VecDeque<Output>,
    /// From this many waiting entries on, [`Outputs::full`] holds.
    limit: usize,
    /// The application dropped its receiver: outputs are discarded.
    closed: bool,
    counters: Arc<Counters>,
}

impl Outputs {
    /// An empty buffer that is full from `limit` entries on (at least one).
    pub(super) fn new(limit: usize, counters: Arc<Counters>) -> Self {
        Self {
            pending: VecDeque::new(),
            limit: limit.max(1),
            closed: false,
            counters,
        }
    }

    /// Appends an output. Never drops one: the first push that makes the buffer full is
    /// counted in `output_stalls`, and the longest the buffer grew in `outputs_peak`.
    pub(super) fn push(&mut self, o: Output) {
        if self.closed {
            return;
        }
        self.pending.push_back(o);
        let n = self.pending.len();
        if n == self.limit {
            Counters::add(&self.counters.output_stalls);
        }
        Counters::max(&self.counters.outputs_peak, n);
    }

    /// Whether `limit` outputs or more wait: data-class frames and commands wait until not.
    pub(super) fn full(&self) -> bool {
        self.pending.len() >= self.limit
    }

    /// Outputs waiting here (beyond the channel).
    pub(super) fn len(&self) -> usize {
        self.pending.len()
    }

    /// Whether anything waits for room in the channel.
    pub(super) fn waiting(&self) -> bool {
        !self.closed && !self.pending.is_empty()
    }

    /// Hands the oldest output to a reserved slot of the channel (an `Err`: the application
    /// dropped its receiver, so everything is discarded from now on).
    pub(super) fn send_one(
        &mut self,
        permit: Result<mpsc::Permit<'_, Output>, mpsc::error::SendError<()>>,
    ) {
        match permit {
            Ok(p) => {
                if let Some(o) = self.pending.pop_front() {
                    p.send(o);
                }
            }
            Err(_) => self.close(),
        }
    }

    /// Moves as many outputs as the channel has room for, reserving that room at once.
    pub(super) fn flush(&mut self, out: &mpsc::Sender<Output>) {
        if !self.waiting() {
            return;
        }
        let n = self.pending.len().min(out.capacity());
        match out.try_reserve_many(n.max(1)) {
            Ok(permits) => {
                for p in permits {
                    if let Some(o) = self.pending.pop_front() {
                        p.send(o);
                    }
                }
            }
            Err(mpsc::error::TrySendError::Full(())) => {}
            Err(mpsc::error::TrySendError::Closed(())) => self.close(),
        }
    }

    fn close(&mut self) {
        self.closed = true;
        self.pending.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lifeline_core::tree::Rank;
    use lifeline_core::Instant;

    fn up(r: u32) -> Output {
        Output::LinkUp {
            peer: Rank(r),
            at: Instant::ZERO,
        }
    }

    /// Past the channel's room and past the limit, every output is kept, in order; the stall
    /// and the peak are counted; a closed receiver discards.
    #[tokio::test]
    async fn keeps_every_output_in_order_past_the_limit() {
        let counters = Arc::new(Counters::default());
        let mut o = Outputs::new(3, counters.clone());
        let (tx, mut rx) = mpsc::channel(2);
        for r in 0..10 {
            o.push(up(r));
            assert_eq!(o.full(), r + 1 >= 3);
        }
        o.flush(&tx);
        assert_eq!((o.len(), o.full()), (8, true));
        let s = counters.snapshot();
        assert_eq!((s.output_stalls, s.outputs_peak), (1, 10));
        let mut got = Vec::new();
        while got.len() < 10 {
            got.push(rx.recv().await.expect("open"));
            o.flush(&tx);
        }
        assert_eq!(got, (0..10).map(up).collect::<Vec<_>>());
        assert!(!o.waiting());
        drop(rx);
        o.push(up(11));
        o.flush(&tx);
        o.push(up(12));
        assert!(!o.waiting(), "a closed receiver discards");
    }
}
