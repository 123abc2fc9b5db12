//! The `lifeline` command: one module per subcommand, dispatched from [`Cli`].
//!
//! Exit status: 0 on success (including a reader closing the pipe early), 2 for bad input (clap
//! usage errors, the subcommands' own checks, malformed frames given to `decode`, a non-empty
//! `certs --out` without `--force`), 1 when a simulation fails, writing files or the output
//! fails, 3 when `lifeline node` was evicted from its cluster.
//!
//! Diagnostics: `lifeline node` and `lifeline cluster` write structured diagnostics (dials,
//! accepts, refusals, handshake failures, link changes with reasons, view changes, injected
//! faults) to stderr when `RUST_LOG` asks for them, e.g. `RUST_LOG=debug` or
//! `RUST_LOG=lifeline_transport_tcp=trace`; each node's lines carry its `node{rank=R}` span, and
//! the nodes of `lifeline cluster` inherit its `RUST_LOG`. They are off by default and never
//! touch stdout.

use std::io::{self, BufWriter, Write};
use std::process::ExitCode;

use clap::Parser;

mod certs_cmd;
mod cluster;
mod decode_cmd;
mod nft;
mod node_cmd;
mod node_json;
mod node_out;
mod sim_cmd;
mod sim_elastic;
mod sim_membership;
mod sim_partition;
mod sim_revoke;
mod sim_shrink;
mod tree_cmd;

/// Lifeline, a fault-tolerant control overlay: inspect and drive it.
#[derive(Debug, Parser)]
#[command(name = "lifeline", version)]
enum Cli {
    /// Show the repaired routing tree: every rank's view, or one rank's.
    Tree(tree_cmd::TreeArgs),
    /// Run a deterministic simulation of many nodes (one seed replays it exactly).
    Sim(sim_cmd::SimArgs),
    /// Decode wire frames from stdin (binary stream, or hex lines) into JSON lines.
    Decode(decode_cmd::DecodeArgs),
    /// Run one node on TCP until killed, printing events as JSON lines.
    Node(node_cmd::NodeArgs),
    /// Run a local cluster of `lifeline node` processes, kill some, and report.
    Cluster(cluster::ClusterArgs),
    /// Make a cluster CA and one certificate per rank for the QUIC transport.
    Certs(certs_cmd::CertsArgs),
}

/// The exit status of an evicted `lifeline node` (`lifeline cluster` tells it from others).
pub(crate) const EXIT_EVICTED: u8 = 3;

/// Why a subcommand failed; decides the exit status.
#[derive(Debug)]
enum CliError {
    /// Bad input, reported as one line on stderr: exit 2.
    Usage(String),
    /// Writing the output failed (other than a closed pipe): exit 1.
    Io(io::Error),
    /// The command ran and failed (e.g. a simulation broke an invariant); the message may span
    /// several lines: exit 1.
    Failed(String),
    /// `lifeline node` was removed from its cluster: exit 3.
    Evicted(String),
}

/// Runs `body` on a buffered, locked stdout and flushes it. A reader that closes the pipe early
/// (`lifeline tree ... | head`) is not an error: the rest of the output is dropped.
fn write_stdout(body: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> Result<(), CliError> {
    try_write_stdout(|out| body(out).map_err(CliError::Io))
}

/// Like [`write_stdout`], for a body that can also fail on its own (bad input found midway):
/// what it wrote before failing is flushed, then its error is returned. A closed pipe is still
/// not an error.
fn try_write_stdout(
    body: impl FnOnce(&mut dyn Write) -> Result<(), CliError>,
) -> Result<(), CliError> {
    let mut out = BufWriter::new(io::stdout().lock());
    let result = body(&mut out);
    let flushed = out.flush();
    match result.and(flushed.map_err(CliError::Io)) {
        Err(CliError::Io(e)) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        r => r,
    }
}

/// Installs the stderr diagnostics subscriber if `RUST_LOG` is set (an invalid filter is
/// reported and ignored). Without it no subscriber exists, so the transport's diagnostics cost
/// nothing.
fn init_tracing() {
    if std::env::var_os("RUST_LOG").is_none() {
        return;
    }
    match tracing_subscriber::EnvFilter::try_from_default_env() {
        Ok(filter) => {
            let _ = tracing_subscriber::fmt()
                .with_env_filter(filter)
                .with_writer(io::stderr)
                .try_init();
        }
        Err(e) => eprintln!("lifeline: ignoring RUST_LOG: {e}"),
    }
}

fn main() -> ExitCode {
    let result = match Cli::parse() {
        Cli::Tree(args) => tree_cmd::run(&args),
        Cli::Sim(args) => sim_cmd::run(&args),
        Cli::Decode(args) => decode_cmd::run(&args),
        Cli::Node(args) => node_cmd::run(&args),
        Cli::Cluster(args) => cluster::run(&args),
        Cli::Certs(args) => certs_cmd::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(CliError::Usage(msg)) => {
            eprintln!("lifeline: error: {msg}");
            ExitCode::from(2)
        }
        Err(CliError::Io(e)) => {
            eprintln!("lifeline: error writing output: {e}");
            ExitCode::FAILURE
        }
        Err(CliError::Failed(msg)) => {
            eprintln!("lifeline: {msg}");
            ExitCode::FAILURE
        }
        Err(CliError::Evicted(msg)) => {
            eprintln!("lifeline: {msg}");
            ExitCode::from(EXIT_EVICTED)
        }
    }
}
