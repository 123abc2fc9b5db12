//! The bounded per-peer, per-class send queue between the driver and a connection's writer.

use std::collections::VecDeque;
use std::sync::{Mutex, PoisonError};

use bytes::Bytes;
use tokio::sync::Notify;

/// Frames waiting for one connection's writer. The driver pushes, the writer takes everything
/// at once (one lock per batch) and is woken by `notify`. The byte count is what back-pressure
/// and the hard bound look at.
#[derive(Debug, Default)]
pub struct SendQueue {
    inner: Mutex<Inner>,
    /// Woken when the queue goes from empty to not empty; the writer waits on it.
    pub notify: Notify,
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

    /// Appends frames in order under one lock; returns the bytes now queued. The writer is woken
    /// only when the queue goes from empty to not empty: it takes everything before it waits
    /// again, so frames pushed onto a non-empty queue are always seen.
    pub fn push_many(&self, frames: impl Iterator<Item = Bytes>) -> usize {
        let mut q = self.lock();
        let was_empty = q.frames.is_empty();
        for f in frames {
            q.bytes += f.len();
            q.frames.push_back(f);
        }
        let b = q.bytes;
        let wake = was_empty && !q.frames.is_empty();
        drop(q);
        if wake {
            self.notify.notify_one();
        }
        b
    }

    /// Moves every queued frame into `out` (which the writer keeps empty between calls).
    pub fn take(&self, out: &mut VecDeque<Bytes>) {
        let mut q = self.lock();
        std::mem::swap(&mut q.frames, out);
        q.bytes = 0;
    }

    /// Bytes queued and not yet taken by the writer.
    pub fn bytes(&self) -> usize {
        self.lock().bytes
    }
}
