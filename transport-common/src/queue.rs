//! The bounded per-peer, per-class send queue between the driver and a connection's writer.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use tokio::sync::Notify;

/// Frames waiting for one connection's writer. The driver pushes, the writer takes everything
/// at once (one lock per batch) and is woken by `notify`. The byte count is what back-pressure
/// and the hard bound look at.
#[derive(Debug, Default)]
pub struct SendQueue {
    inner: Mutex<Inner>,
    /// Told whenever the writer takes frames (the queue then holds nothing): what
    /// [`Handle::writable`](crate::Handle::writable) waits on. `None` for a queue no
    /// application waits on.
    space: Option<Arc<Notify>>,
    /// Woken when the queue goes from empty to not empty; the writer waits on it.
    pub notify: Notify,
}

#[derive(Debug, Default)]
struct Inner {
    frames: VecDeque<Bytes>,
    bytes: usize,
}

impl SendQueue {
    /// An empty queue whose takes wake the waiters of `space`.
    pub fn with_space(space: Arc<Notify>) -> Self {
        Self {
            space: Some(space),
            ..Self::default()
        }
    }

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
        let took = std::mem::take(&mut q.bytes);
        drop(q);
        if took > 0 {
            if let Some(s) = &self.space {
                s.notify_waiters();
            }
        }
    }

    /// Bytes queued and not yet taken by the writer.
    pub fn bytes(&self) -> usize {
        self.lock().bytes
    }
}

#[cfg(test)]
mod space_tests {
    use super::*;

    /// A take that removes frames wakes every waiter of `space` (registered before it); a take
    /// of an empty queue wakes nobody.
    #[tokio::test]
    async fn a_take_wakes_the_space_waiters() {
        let space = Arc::new(Notify::new());
        let q = SendQueue::with_space(space.clone());
        let mut out = VecDeque::new();
        let waiter = space.notified();
        tokio::pin!(waiter);
        waiter.as_mut().enable();
        q.take(&mut out);
        let woke =
            tokio::time::timeout(std::time::Duration::from_millis(50), waiter.as_mut()).await;
        assert!(woke.is_err(), "an empty take woke a waiter");
        assert_eq!(q.push_many([Bytes::from_static(b"frame")].into_iter()), 5);
        q.take(&mut out);
        assert_eq!((out.len(), q.bytes()), (1, 0));
        tokio::time::timeout(std::time::Duration::from_secs(5), waiter)
            .await
            .expect("the take woke the waiter");
    }
}
