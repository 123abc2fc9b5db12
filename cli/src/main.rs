//! The `lifeline` command: one module per subcommand, dispatched from [`Cli`].
//!
//! Exit status: 0 on success (including a reader closing the pipe early), 2 for bad input (clap
//! usage errors and the subcommands' own checks), 1 when writing the output fails.

use std::io::{self, BufWriter, Write};
use std::process::ExitCode;

use clap::Parser;

mod tree_cmd;

/// Lifeline, a fault-tolerant control overlay: inspect and drive it.
#[derive(Debug, Parser)]
#[command(name = "lifeline", version)]
enum Cli {
    /// Show the repaired routing tree: every rank's view, or one rank's.
    Tree(tree_cmd::TreeArgs),
}

/// Why a subcommand failed; decides the exit status.
#[derive(Debug)]
enum CliError {
    /// Bad input, reported as one line on stderr: exit 2.
    Usage(String),
    /// Writing the output failed (other than a closed pipe): exit 1.
    Io(io::Error),
}

/// Runs `body` on a buffered, locked stdout and flushes it. A reader that closes the pipe early
/// (`lifeline tree ... | head`) is not an error: the rest of the output is dropped.
fn write_stdout(body: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> Result<(), CliError> {
    let mut out = BufWriter::new(io::stdout().lock());
    match body(&mut out).and_then(|()| out.flush()) {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => Err(CliError::Io(e)),
        _ => Ok(()),
    }
}

fn main() -> ExitCode {
    let result = match Cli::parse() {
        Cli::Tree(args) => tree_cmd::run(&args),
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
    }
}
