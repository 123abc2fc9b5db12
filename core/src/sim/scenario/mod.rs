//! The named scenarios, one per protocol: each runs a seeded [`Sim`](super::Sim) of real nodes
//! under faults, checks the protocol's guarantees as it goes, and reports what it measured.
//! Every run takes the simulator's one [`Hooks`](super::Hooks) (a trace sink, a progress
//! callback) and replays bit for bit from its seed.
//!
//! - [`flood`]: the test flood (every rank delivers each flood once, under crashes);
//! - [`xcast`]: reliable broadcast (exactly once and in order at every survivor, completion
//!   reported once, under crashes of any rank, the root included);
//! - [`relm`]: reliable messaging (exactly once and in order per chain, across relay deaths);
//! - [`revoke`]: the revoke flood (every survivor gets `Revoked` exactly once, despite
//!   crashes before and during the flood);
//! - [`shrink`]: shrink campaigns under joins, crashes and load (one completion each, one
//!   departure view, no failure verdict for a departing rank);
//! - [`partition`]: quorum views under random partitions (any split, one-way, flapping) and
//!   coordinator faults (S1-S3, a minority decides nothing, the majority side decides);
//! - [`membership`]: the heartbeat detector and membership under every fault kind the
//!   simulator has, against a fault oracle.

pub mod elastic;
pub mod flood;
pub mod membership;
pub mod partition;
pub mod relm;
pub mod revoke;
pub mod shrink;
pub mod xcast;
