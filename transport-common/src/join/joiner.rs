//! The joiner side: [`run_joiner`] drives the core's [`Joiner`] over an adapter's join
//! connections until a contact admits this process.

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use lifeline_core::join::{
    Admission, JoinId, Joiner, JoinerConfig, JoinerError, JoinerEvent, JoinerStats,
};
use lifeline_core::tree::Rank;
use lifeline_core::Instant;
use tokio::task::JoinSet;
use tokio::time::Instant as Tick;

use super::JoinAnswer;
use crate::book::AddressBook;

/// How a joiner tries, and when it gives up. The back-off and the try's timeout are the core
/// [`JoinerConfig`]'s.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct JoinSettings {
    /// First back-off after a failed try (it doubles per failure, with jitter).
    pub retry_min: Duration,
    /// Longest back-off.
    pub retry_max: Duration,
    /// A try with no answer for this long has failed (longer than the members'
    /// `join.timeout`, 5 s by default, after which a contact answers "retry" itself).
    pub attempt_timeout: Duration,
    /// The whole join is given up after this long ([`JoinError::GaveUp`]).
    pub give_up: Duration,
    /// Largest span accepted in an admission.
    pub max_span: u32,
    /// Most entries accepted in the contact's address book.
    pub max_book: usize,
}

impl Default for JoinSettings {
    /// The core's back-off (50 ms doubling to 2 s) and try timeout (15 s); given up after
    /// 60 s; spans and books up to 2^24 ranks.
    fn default() -> Self {
        let c = JoinerConfig::new(1, Bytes::new());
        Self {
            retry_min: c.retry_min.into(),
            retry_max: c.retry_max.into(),
            attempt_timeout: c.attempt_timeout.into(),
            give_up: Duration::from_secs(60),
            max_span: c.max_span,
            max_book: c.max_span as usize,
        }
    }
}

/// A successful join: what the embedder builds and starts its node from
/// ([`Config::for_admission`](lifeline_core::Config::for_admission) with `admission`, the
/// driver with `book`, on the listener whose address it gave).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Joined {
    /// Rank, admitting epoch and tree.
    pub admission: Admission,
    /// Every rank's address as the admitting contact knew it (this process's own entry
    /// included).
    pub book: AddressBook,
    /// The try that was answered.
    pub id: JoinId,
    /// The contact that answered.
    pub contact: SocketAddr,
    /// From the first request to the admission.
    pub elapsed: Duration,
    /// The joiner's counters (`tries`: requests sent).
    pub stats: JoinerStats,
}

/// Why a join failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum JoinError {
    /// The joiner could not start (no contact, an address too long, a bad back-off).
    #[error(transparent)]
    Joiner(#[from] JoinerError),
    /// Not admitted within [`JoinSettings::give_up`].
    #[error("not admitted after {tries} tries in {after:?}{}", last.as_ref().map_or(String::new(), |l| format!(" (last failure: {l})")))]
    GaveUp {
        /// Requests sent.
        tries: u64,
        /// How long it tried.
        after: Duration,
        /// The last failure seen.
        last: Option<String>,
    },
    /// The admission came without an address book, or with this process's rank at another
    /// address than the one it gave.
    #[error("the admission of rank {rank} came with a bad address book: {why}")]
    Book {
        /// The admitted rank.
        rank: Rank,
        /// What was wrong.
        why: String,
    },
}

/// Why one join connection gave no answer (the adapter's error, for diagnostics).
pub type DialError = Box<dyn std::error::Error + Send + Sync>;

/// Drives a [`Joiner`] for a process that listens at `addr` (already bound: its address goes
/// in the request, and members dial it as soon as they applied the admission) until one of
/// `contacts` admits it. `dial(contact, request)` opens one join connection, sends the request
/// and returns the contact's [`JoinAnswer`] (an error: the connection failed or closed before
/// an answer, which the joiner counts as a failed try). Tries run as tasks of their own, so a
/// contact that hangs does not hold back the next try; every try keeps the process's nonce
/// (drawn from `seed`: give fresh OS randomness), so retries and duplicates are one
/// admission.
pub async fn run_joiner<D, F>(
    contacts: &[SocketAddr],
    addr: SocketAddr,
    settings: &JoinSettings,
    seed: u64,
    dial: D,
) -> Result<Joined, JoinError>
where
    D: Fn(SocketAddr, Bytes) -> F,
    F: Future<Output = Result<JoinAnswer, DialError>> + Send + 'static,
{
    let origin = Tick::now();
    let now =
        || Instant::from_nanos(u64::try_from(origin.elapsed().as_nanos()).unwrap_or(u64::MAX));
    let mut cfg = JoinerConfig::new(contacts.len() as u32, Bytes::from(addr.to_string()));
    cfg.retry_min = settings.retry_min.into();
    cfg.retry_max = settings.retry_max.into();
    cfg.attempt_timeout = settings.attempt_timeout.into();
    cfg.max_span = settings.max_span;
    let mut j = Joiner::new(cfg, seed, now())?;
    let deadline = origin + settings.give_up;
    let mut tries: JoinSet<(u32, JoinId, Result<JoinAnswer, String>)> = JoinSet::new();
    let mut last: Option<String> = None;
    // The book that came with the admission (set in the same step as the event).
    let mut admitted_with: Option<(Option<AddressBook>, u32)> = None;
    loop {
        while let Some(t) = j.poll_transmit() {
            let Some(&to) = contacts.get(t.contact as usize) else {
                continue;
            };
            tracing::debug!(contact = %to, id = %t.id, "join request");
            let answer = dial(to, t.bytes);
            let (c, id) = (t.contact, t.id);
            tries.spawn(async move { (c, id, answer.await.map_err(|e| e.to_string())) });
        }
        while let Some(e) = j.poll_event() {
            match e {
                JoinerEvent::Admitted { id, admission } => {
                    let rank = admission.rank;
                    let (book, contact) = admitted_with.take().unwrap_or((None, 0));
                    let Some(mut book) = book else {
                        return Err(JoinError::Book {
                            rank,
                            why: "none came with it".into(),
                        });
                    };
                    if let Err(known) = book.add(rank, addr) {
                        return Err(JoinError::Book {
                            rank,
                            why: format!("it is listed at {known}, not {addr}"),
                        });
                    }
                    tracing::debug!(rank = rank.0, epoch = admission.epoch, %id, "admitted");
                    return Ok(Joined {
                        admission,
                        book,
                        id,
                        contact: contacts[contact as usize],
                        elapsed: origin.elapsed(),
                        stats: j.stats().clone(),
                    });
                }
                JoinerEvent::Retrying {
                    id,
                    why,
                    next_contact,
                    after,
                } => {
                    tracing::debug!(%id, ?why, next_contact, ?after, "join try failed");
                    if !matches!(why, lifeline_core::join::TryFailure::ContactFailed) {
                        last = Some(format!("{why:?}"));
                    }
                }
                other => tracing::debug!(event = ?other, "joiner event"),
            }
        }
        let wake = j
            .poll_timeout()
            .map_or(deadline, |at| origin + Duration::from_nanos(at.as_nanos()))
            .min(deadline);
        tokio::select! {
            Some(done) = tries.join_next() => {
                let Ok((c, id, result)) = done else { continue };
                match result {
                    Ok(answer) => {
                        let JoinAnswer { reply, book } = answer;
                        match j.handle_reply(now(), c, reply) {
                            Ok(()) if j.is_admitted() && admitted_with.is_none() => {
                                admitted_with = Some((book, c));
                            }
                            Ok(()) => {}
                            Err(e) => {
                                last = Some(format!("malformed reply from {}: {e}", contacts[c as usize]));
                                j.handle_contact_failed(now(), c, id);
                            }
                        }
                    }
                    Err(e) => {
                        last = Some(format!("{}: {e}", contacts[c as usize]));
                        j.handle_contact_failed(now(), c, id);
                    }
                }
            }
            () = tokio::time::sleep_until(wake) => {
                if Tick::now() >= deadline {
                    return Err(JoinError::GaveUp {
                        tries: j.stats().tries,
                        after: origin.elapsed(),
                        last,
                    });
                }
                j.handle_timeout(now());
            }
        }
    }
}
