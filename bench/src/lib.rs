//! Lifeline's scale experiments and the shared helpers of its criterion benchmarks.
//!
//! The `scale` binary dispatches one subcommand per module: [`repair`] (batched versus
//! one-death-at-a-time tree repair) and [`flood`] (a fault-free flood over N simulated nodes);
//! later `xcast` slots in the same way, as a module exposing `USAGE` and
//! `cli(&[String]) -> Result<(), CliError>`.

pub mod args;
pub mod flood;
pub mod repair;
pub mod report;
pub mod rng;
pub mod subtree;

pub use args::CliError;
