//! `scale`: Lifeline's scale experiments, one subcommand per module of `lifeline_bench`.
//!
//! Each subcommand prints a human-readable summary line and, last, one JSON line. Bad arguments
//! print the error and the usage to stderr and exit with status 2; a run that fails its own
//! checks prints why and exits with status 1.

use std::process::ExitCode;

use lifeline_bench::{
    flood, joins, membership, rankset, relm, repair, revoke, shrink, wakeups, xcast, CliError,
};

/// A subcommand: its name, one-line summary, usage text and entry point.
struct Command {
    name: &'static str,
    about: &'static str,
    usage: &'static str,
    run: fn(&[String]) -> Result<(), CliError>,
}

/// A new experiment is one module in `lifeline_bench` and one entry here.
const COMMANDS: &[Command] = &[
    Command {
        name: "wakeups",
        about: "idle nodes' wake-ups per second, heartbeats at free phases vs on the grid",
        usage: wakeups::USAGE,
        run: wakeups::cli,
    },
    Command {
        name: "repair",
        about: "batched vs one-death-at-a-time repair of a failed subtree",
        usage: repair::USAGE,
        run: repair::cli,
    },
    Command {
        name: "flood",
        about: "a fault-free flood over N simulated nodes: throughput and peak RSS",
        usage: flood::USAGE,
        run: flood::cli,
    },
    Command {
        name: "xcast",
        about: "a failure-free root xcast stream over N simulated nodes: frames and peak RSS",
        usage: xcast::USAGE,
        run: xcast::cli,
    },
    Command {
        name: "relm",
        about: "a failure-free RELM stream between random pairs: frames per hop and peak RSS",
        usage: relm::USAGE,
        run: relm::cli,
    },
    Command {
        name: "membership",
        about: "detector and evidence-based removal under every fault kind, over many seeds",
        usage: membership::USAGE,
        run: membership::cli,
    },
    Command {
        name: "joins",
        about: "a cluster formed from joins: view changes, join latency, start-up time",
        usage: joins::USAGE,
        run: joins::cli,
    },
    Command {
        name: "shrink",
        about: "one campaign draining a whole branch against the per-death path: repair, time",
        usage: shrink::USAGE,
        run: shrink::cli,
    },
    Command {
        name: "revoke",
        about: "one revoke over the overlay of N simulated nodes: hops against its diameter",
        usage: revoke::USAGE,
        run: revoke::cli,
    },
    Command {
        name: "rankset",
        about: "RankSet::contains against the dense bitset it replaced, on two dead sets",
        usage: rankset::USAGE,
        run: rankset::cli,
    },
];

fn top_usage() -> String {
    let mut s =
        String::from("usage: scale <command> [flags]   (scale <command> --help)\n\ncommands:\n");
    for c in COMMANDS {
        s.push_str(&format!("  {:<10} {}\n", c.name, c.about));
    }
    s
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(first) = args.first() else {
        eprintln!("error: no command given\n\n{}", top_usage());
        return ExitCode::from(2);
    };
    if first == "-h" || first == "--help" || first == "help" {
        print!("{}", top_usage());
        return ExitCode::SUCCESS;
    }
    let Some(cmd) = COMMANDS.iter().find(|c| c.name == first) else {
        eprintln!("error: unknown command {first:?}\n\n{}", top_usage());
        return ExitCode::from(2);
    };
    match (cmd.run)(&args[1..]) {
        Ok(()) => ExitCode::SUCCESS,
        Err(CliError::Help) => {
            println!("{}", cmd.usage);
            ExitCode::SUCCESS
        }
        Err(CliError::Usage(msg)) => {
            eprintln!("error: {msg}\n\n{}", cmd.usage);
            ExitCode::from(2)
        }
        Err(CliError::Failed(msg)) => {
            eprintln!("error: {msg}");
            ExitCode::FAILURE
        }
    }
}
