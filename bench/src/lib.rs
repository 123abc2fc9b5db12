//! Lifeline's scale experiments and the shared helpers of its criterion benchmarks.
//!
//! The `scale` binary dispatches one subcommand per module: [`repair`] (batched versus
//! one-death-at-a-time tree repair), [`flood`] (a fault-free flood over N simulated nodes),
//! [`xcast`] (a failure-free stream of reliable broadcasts from the root), [`relm`] (a
//! failure-free stream of reliable point-to-point messages between random pairs),
//! [`membership`] (the membership scenario over many seeds), [`joins`] (a cluster formed from
//! joins), [`shrink`] (a shrink campaign draining a whole branch against the per-death path),
//! [`revoke`] (one revoke over the overlay: hops against its diameter) and [`rankset`] (`RankSet::contains` against the dense bitset it replaced). Each module
//! exposes `USAGE` and `cli(&[String]) -> Result<(), CliError>`.

pub mod args;
pub mod flood;
pub mod joins;
pub mod membership;
pub mod rankset;
pub mod relm;
pub mod repair;
pub mod report;
pub mod revoke;
pub mod rng;
pub mod shrink;
pub mod shrink_sim;
pub mod subtree;
pub mod wakeups;
pub mod xcast;

pub use args::CliError;
