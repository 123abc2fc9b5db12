//! [`TestNode`] for the shared driver's [`RunningNode`]: every adapter built on
//! `lifeline-transport-common` (TCP, QUIC) is observed and commanded the same way, so the suite's
//! view of a node is written once.

use bytes::Bytes;
use lifeline_core::tree::Rank;
use lifeline_core::{Class, Instant, Node, Stats};
use lifeline_transport_common::{Output, RunningNode};

use crate::{Counters, Observed, TestNode};

impl TestNode for RunningNode {
    fn rank(&self) -> Rank {
        self.handle.rank()
    }

    async fn command<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Node, Instant) -> R + Send + 'static,
    ) -> Result<R, String> {
        self.handle.command(f).await.map_err(|e| e.to_string())
    }

    async fn core_stats(&self) -> Stats {
        self.handle
            .inspect(|n| n.stats().clone())
            .await
            .expect("running")
    }

    fn try_next(&mut self) -> Option<Observed> {
        loop {
            return match self.outputs.try_recv().ok()? {
                Output::Event { event: e, .. } => Some(Observed::Event(e)),
                Output::LinkUp { peer, .. } => Some(Observed::LinkUp(peer)),
                Output::LinkDown { peer, .. } => Some(Observed::LinkDown(peer)),
                _ => continue,
            };
        }
    }

    async fn send_raw(&self, to: Rank, class: Class, frame: Bytes) -> Result<(), String> {
        self.handle
            .send_raw(to, class, frame)
            .await
            .map_err(|e| e.to_string())
    }

    fn counters(&self) -> Counters {
        let s = self.handle.stats();
        Counters {
            handshakes_refused: s.handshakes_refused,
            malformed: s.malformed,
            link_downs: s.link_downs,
            dials: s.dials,
        }
    }

    async fn grow(&self, new_span: u32, peers: &crate::Book) -> Result<(), String> {
        self.handle
            .grow(new_span, &crate::address_book(peers))
            .await
            .map_err(|e| e.to_string())
    }

    async fn stop(self) {
        self.handle.shutdown().await;
        let _ = self.task.await;
    }
}
