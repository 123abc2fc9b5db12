//! [`Joiner`]: the sans-IO machine of a process that is not a member yet.
//!
//! It sends a [`JoinRequest`] to one of its contacts (members it was told about: `lifeline node
//! --join HOST:PORT`, a launcher's list), waits for the [`JoinReply`] that echoes the request's
//! [`JoinId`], and either reports [`JoinerEvent::Admitted`] (the embedder then builds its
//! [`Node`](crate::Node) from the [`Admission`] with
//! [`Config::for_admission`](crate::Config::for_admission)) or tries again: after a "retry"
//! verdict, a failed connection or no answer within `attempt_timeout`, it backs off
//! exponentially (with jitter) and asks the next contact. Every try keeps the process's nonce
//! (the coordinator admits a nonce once, so a duplicated or retried join is one admission) and
//! raises the sequence number (a late answer to an older try is still taken if it admits, and
//! ignored otherwise).

use std::collections::VecDeque;

use bytes::Bytes;

use super::wire::{Admission, JoinId, JoinReply, JoinRequest, JoinVerdict, RetryReason};
use crate::rng::Rng;
use crate::time::{Duration, Instant};
use crate::wire::DecodeError;

/// A joiner's settings.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct JoinerConfig {
    /// How many contacts the embedder can reach (indices `0..contacts`, tried in turn).
    pub contacts: u32,
    /// Where members will reach this process once admitted (the adapter's encoding, at most
    /// [`MAX_ADDR_LEN`](super::MAX_ADDR_LEN) bytes).
    pub addr: Bytes,
    /// First back-off after a failed try.
    pub retry_min: Duration,
    /// Longest back-off (the doubling stops here).
    pub retry_max: Duration,
    /// A try with no answer for this long has failed (longer than the members'
    /// `join.timeout`, after which a contact answers "retry" itself).
    pub attempt_timeout: Duration,
    /// Largest span accepted in an admission's snapshot.
    pub max_span: u32,
}

impl JoinerConfig {
    /// Defaults for `contacts` contacts and this address: back-off 50 ms doubling to 2 s, a try
    /// given up after 15 s, spans up to 2^24.
    pub fn new(contacts: u32, addr: Bytes) -> Self {
        Self {
            contacts,
            addr,
            retry_min: Duration::from_millis(50),
            retry_max: Duration::from_secs(2),
            attempt_timeout: Duration::from_secs(15),
            max_span: 1 << 24,
        }
    }
}

/// Why a joiner cannot start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum JoinerError {
    /// No contact to ask.
    #[error("a joiner needs at least one contact")]
    NoContacts,
    /// The address is longer than [`MAX_ADDR_LEN`](super::MAX_ADDR_LEN).
    #[error("joiner address of {0} bytes is over the limit of {max}", max = super::MAX_ADDR_LEN)]
    AddrTooLong(usize),
    /// `retry_min` is zero or above `retry_max`, or `attempt_timeout` is zero.
    #[error("joiner back-off must satisfy 0 < retry_min <= retry_max, and attempt_timeout > 0")]
    Backoff,
}

/// A request to send: open a join connection to contact `contact` and write `bytes`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinTransmit {
    /// The contact's index (`0..contacts`).
    pub contact: u32,
    /// The try's id (echoed by the answer).
    pub id: JoinId,
    /// The encoded [`JoinRequest`].
    pub bytes: Bytes,
}

/// Why a try failed (in [`JoinerEvent::Retrying`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TryFailure {
    /// The contact answered "retry".
    Retry(RetryReason),
    /// The connection to the contact failed or closed before an answer.
    ContactFailed,
    /// No answer within `attempt_timeout`.
    NoAnswer,
}

/// What a joiner reports.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum JoinerEvent {
    /// Admitted: build the node from this (the machine is done).
    Admitted {
        /// The try that was answered.
        id: JoinId,
        /// Rank, epoch and tree.
        admission: Admission,
    },
    /// A try failed; the next goes to `next_contact` after `after`.
    Retrying {
        /// The failed try.
        id: JoinId,
        /// Why.
        why: TryFailure,
        /// The contact asked next.
        next_contact: u32,
        /// The back-off before it.
        after: Duration,
    },
}

/// A joiner's counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct JoinerStats {
    /// Requests sent.
    pub tries: u64,
    /// Answers for another try or another joiner (ignored).
    pub foreign_replies: u64,
    /// Answers that did not decode.
    pub malformed_replies: u64,
}

/// The try in flight.
#[derive(Clone, Copy, Debug)]
struct Try {
    id: JoinId,
    contact: u32,
    deadline: Instant,
}

/// A process asking to join a running cluster (see the module docs). Drive it like a node:
/// after every input drain [`Joiner::poll_transmit`] and [`Joiner::poll_event`], then wake at
/// [`Joiner::poll_timeout`].
#[derive(Debug)]
pub struct Joiner {
    cfg: JoinerConfig,
    rng: Rng,
    nonce: u64,
    seq: u32,
    /// The try in flight.
    current: Option<Try>,
    /// When the next try goes out (while backing off).
    next_at: Option<(Instant, u32)>,
    /// Consecutive failed tries (the back-off's exponent).
    failures: u32,
    transmits: VecDeque<JoinTransmit>,
    events: VecDeque<JoinerEvent>,
    admitted: bool,
    stats: JoinerStats,
}

impl Joiner {
    /// A joiner whose first try goes to contact `seed % contacts` at once. `seed` drives the
    /// nonce (use OS randomness in a real process: two processes must never share a nonce) and
    /// the jitter.
    pub fn new(cfg: JoinerConfig, seed: u64, now: Instant) -> Result<Self, JoinerError> {
        if cfg.contacts == 0 {
            return Err(JoinerError::NoContacts);
        }
        if cfg.addr.len() > super::MAX_ADDR_LEN as usize {
            return Err(JoinerError::AddrTooLong(cfg.addr.len()));
        }
        if cfg.retry_min == Duration::ZERO
            || cfg.retry_min > cfg.retry_max
            || cfg.attempt_timeout == Duration::ZERO
        {
            return Err(JoinerError::Backoff);
        }
        let mut rng = Rng::new(seed);
        let nonce = rng.next_u64();
        let first = (seed % u64::from(cfg.contacts)) as u32;
        let mut j = Self {
            cfg,
            rng,
            nonce,
            seq: 0,
            current: None,
            next_at: None,
            failures: 0,
            transmits: VecDeque::new(),
            events: VecDeque::new(),
            admitted: false,
            stats: JoinerStats::default(),
        };
        j.send(now, first);
        Ok(j)
    }

    /// This process's nonce (the same in every try).
    pub fn nonce(&self) -> u64 {
        self.nonce
    }

    /// Whether it was admitted (the machine takes no more input).
    pub fn is_admitted(&self) -> bool {
        self.admitted
    }

    /// Counters.
    pub fn stats(&self) -> &JoinerStats {
        &self.stats
    }

    fn send(&mut self, now: Instant, contact: u32) {
        self.seq = self.seq.wrapping_add(1).max(1);
        let id = JoinId {
            nonce: self.nonce,
            seq: self.seq,
        };
        let req = JoinRequest {
            id,
            addr: self.cfg.addr.clone(),
        };
        self.stats.tries += 1;
        self.current = Some(Try {
            id,
            contact,
            deadline: now + self.cfg.attempt_timeout,
        });
        self.transmits.push_back(JoinTransmit {
            contact,
            id,
            bytes: req.encode(),
        });
    }

    /// The current try failed: back off, then ask the next contact (the same one when it was
    /// only busy).
    fn fail(&mut self, now: Instant, why: TryFailure, at_least: Duration) {
        let Some(t) = self.current.take() else { return };
        self.failures = self.failures.saturating_add(1);
        let exp = self.failures.saturating_sub(1).min(20);
        let base = self
            .cfg
            .retry_min
            .saturating_mul(1u64 << exp)
            .min(self.cfg.retry_max);
        // Jitter: 50–100% of the back-off, so joiners refused together spread out.
        let half = base.as_nanos() / 2;
        let jitter = self.rng.below(half.max(1));
        let after = Duration::from_nanos(half + jitter).max(at_least);
        let next = match why {
            TryFailure::Retry(RetryReason::Busy) => t.contact,
            _ => (t.contact + 1) % self.cfg.contacts,
        };
        self.next_at = Some((now + after, next));
        self.events.push_back(JoinerEvent::Retrying {
            id: t.id,
            why,
            next_contact: next,
            after,
        });
    }

    /// An answer arrived from contact `contact`. An admission for this process's nonce is
    /// taken whichever try it answers; a "retry" for another than the current try, or an
    /// answer for another nonce, is ignored and counted; bytes that do not decode are an error
    /// (counted; the try goes on until its timeout or the connection's end).
    pub fn handle_reply(
        &mut self,
        now: Instant,
        contact: u32,
        bytes: Bytes,
    ) -> Result<(), DecodeError> {
        if self.admitted {
            return Ok(());
        }
        let reply = match JoinReply::decode(bytes, self.cfg.max_span) {
            Ok(r) => r,
            Err(e) => {
                self.stats.malformed_replies += 1;
                return Err(e);
            }
        };
        if reply.id.nonce != self.nonce {
            self.stats.foreign_replies += 1;
            return Ok(());
        }
        match reply.verdict {
            JoinVerdict::Accepted(admission) => {
                self.admitted = true;
                self.current = None;
                self.next_at = None;
                self.events.push_back(JoinerEvent::Admitted {
                    id: reply.id,
                    admission,
                });
            }
            JoinVerdict::Retry { reason, after } => {
                let current = self
                    .current
                    .is_some_and(|t| t.id == reply.id && t.contact == contact);
                if !current {
                    self.stats.foreign_replies += 1;
                    return Ok(());
                }
                self.fail(now, TryFailure::Retry(reason), after);
            }
        }
        Ok(())
    }

    /// The connection for the try `id` to contact `contact` failed or closed before its
    /// answer (ignored for an older try).
    pub fn handle_contact_failed(&mut self, now: Instant, contact: u32, id: JoinId) {
        if self
            .current
            .is_some_and(|t| t.id == id && t.contact == contact)
        {
            self.fail(now, TryFailure::ContactFailed, Duration::ZERO);
        }
    }

    /// When to call [`Joiner::handle_timeout`].
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.admitted {
            return None;
        }
        match (self.current, self.next_at) {
            (Some(t), _) => Some(t.deadline),
            (None, Some((at, _))) => Some(at),
            (None, None) => None,
        }
    }

    /// Time passed: a try past its deadline fails; a back-off that ended sends the next try.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.admitted {
            return;
        }
        if let Some(t) = self.current {
            if now >= t.deadline {
                self.fail(now, TryFailure::NoAnswer, Duration::ZERO);
            }
        }
        if let Some((at, contact)) = self.next_at {
            if now >= at && self.current.is_none() {
                self.next_at = None;
                self.send(now, contact);
            }
        }
    }

    /// The next request to send.
    pub fn poll_transmit(&mut self) -> Option<JoinTransmit> {
        self.transmits.pop_front()
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<JoinerEvent> {
        self.events.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::{Layout, Rank, RankSet, Snapshot};

    fn ms(n: u64) -> Instant {
        Instant::from_nanos(n * 1_000_000)
    }

    fn joiner(contacts: u32) -> Joiner {
        Joiner::new(
            JoinerConfig::new(contacts, Bytes::from_static(b"x")),
            3,
            ms(0),
        )
        .unwrap()
    }

    fn accept(id: JoinId, rank: u32) -> Bytes {
        JoinReply {
            id,
            verdict: JoinVerdict::Accepted(Admission {
                rank: Rank(rank),
                epoch: 1,
                view_epoch: 1,
                snapshot: Snapshot {
                    layout: Layout::new(rank + 1, 2).unwrap(),
                    dead: RankSet::new(),
                },
                startup: None,
            }),
        }
        .encode()
    }

    #[test]
    fn retries_back_off_rotate_contacts_and_keep_the_nonce() {
        let mut j = joiner(3);
        let t1 = j.poll_transmit().unwrap();
        assert_eq!(t1.contact, 0);
        // Busy: the same contact again, not before the contact's back-off.
        let busy = JoinReply {
            id: t1.id,
            verdict: JoinVerdict::Retry {
                reason: RetryReason::Busy,
                after: Duration::from_millis(500),
            },
        };
        j.handle_reply(ms(1), 0, busy.encode()).unwrap();
        assert!(matches!(
            j.poll_event(),
            Some(JoinerEvent::Retrying {
                next_contact: 0,
                ..
            })
        ));
        let at = j.poll_timeout().unwrap();
        assert!(at >= ms(501), "{at:?}");
        j.handle_timeout(at);
        let t2 = j.poll_transmit().unwrap();
        assert_eq!((t2.contact, t2.id.nonce, t2.id.seq), (0, t1.id.nonce, 2));
        // The connection fails: the next contact.
        j.handle_contact_failed(at, 0, t2.id);
        let at2 = j.poll_timeout().unwrap();
        j.handle_timeout(at2);
        let t3 = j.poll_transmit().unwrap();
        assert_eq!(t3.contact, 1);
        // No answer: the one after, with a longer back-off (capped).
        j.handle_timeout(at2 + Duration::from_secs(15));
        let Some(JoinerEvent::Retrying {
            why,
            next_contact,
            after,
            ..
        }) = std::iter::from_fn(|| j.poll_event()).last()
        else {
            panic!()
        };
        assert_eq!((why, next_contact), (TryFailure::NoAnswer, 2));
        assert!(after <= Duration::from_secs(2));
    }

    #[test]
    fn takes_only_its_own_answers() {
        let mut j = joiner(1);
        let t = j.poll_transmit().unwrap();
        let other = JoinId {
            nonce: t.id.nonce ^ 1,
            seq: 1,
        };
        j.handle_reply(ms(1), 0, accept(other, 5)).unwrap();
        assert!(!j.is_admitted());
        assert_eq!(j.stats().foreign_replies, 1);
        assert!(j
            .handle_reply(ms(1), 0, Bytes::from_static(b"junk"))
            .is_err());
        // An admission answering an older try of this process is still this process's rank.
        let old = JoinId {
            nonce: t.id.nonce,
            seq: 0,
        };
        j.handle_reply(ms(2), 0, accept(old, 5)).unwrap();
        assert!(j.is_admitted());
        let _ = j.poll_event();
        assert!(j.poll_event().is_none());
        assert_eq!(j.poll_timeout(), None);
    }
}
