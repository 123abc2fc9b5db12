//! The bounded per-peer, per-class send queue between the driver and a connection's writer.

use std::collections::VecDeque;
use std::sync::{Mutex, PoisonError};

use bytes::Bytes;
use tokio::sync::Notify;

/// Frames waiting for one connection's writer. The driver pushes, the writer takes everything
/// at once (one lock per batch) and is woken by `notify`. The byte count is what back-pressure
/// and the hard bound look at.
#[derive(Debug, Default)]
pub(crate) struct SendQueue {
    inner: Mutex<Inner>,
    pub(crate) notify: Notify,
}

#[derive(Debug, Default)]
struct Inner {
    frames: VecDeque<Bytes>,
    bytes: usize,
}

impl SendQueue {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Appends a frame; returns the bytes now queued. The writer is woken only when the queue
    /// goes from empty to not empty: it takes everything before it waits again, so a push onto
    /// a non-empty queue is always seen.
    pub(crate) fn push(&self, frame: Bytes) -> usize {
        let mut q = self.lock();
        let was_empty = q.frames.is_empty();
        q.bytes += frame.len();
        q.frames.push_back(frame);
        let b = q.bytes;
        drop(q);
        if was_empty {
            self.notify.notify_one();
        }
        b
    }

    /// Moves every queued frame into `out` (which the writer keeps empty between calls).
    pub(crate) fn take(&self, out: &mut VecDeque<Bytes>) {
        let mut q = self.lock();
        std::mem::swap(&mut q.frames, out);
        q.bytes = 0;
    }

    /// Bytes queued and not yet taken by the writer.
    pub(crate) fn bytes(&self) -> usize {
        self.lock().bytes
    }
}
