//! Lifeline's scale experiments and the shared helpers of its criterion benchmarks.
//!
//! The `scale` binary dispatches one subcommand per module: [`repair`] today (batched versus
//! one-death-at-a-time tree repair); later `flood` and `xcast` slot in the same way, each as a
//! module exposing `USAGE` and `cli(&[String]) -> Result<(), CliError>`.

pub mod args;
pub mod repair;
pub mod report;
pub mod rng;
pub mod subtree;

pub use args::CliError;
