//! `lifeline sim elastic`: joiners joining a running simulated cluster (start skew, one or many
//! contacts, contacts and the coordinator crashing mid-join, joiners crashing, CPU-starved
//! members) over one or many seeds, with the scenario's oracle verdict and join latencies.

use std::time::Instant;

use clap::Args;
use lifeline_core::sim::scenario::elastic::{run_elastic, ElasticParams, ElasticReport};
use lifeline_core::sim::scenario::membership::MembershipSummary;

use crate::sim_cmd::run_scenario;
use crate::write_stdout;
use crate::CliError;

/// Arguments of `lifeline sim elastic`.
#[derive(Debug, Args)]
pub(crate) struct ElasticArgs {
    /// Members at the start (with --vary: the largest size drawn).
    #[arg(long, value_name = "N", default_value_t = 64)]
    ranks: u32,
    /// Maximum children per rank, 2..=1024.
    #[arg(long, value_name = "K", default_value_t = 16)]
    radix: u32,
    /// The first seed; with --seeds M, seeds S..S+M run one after the other.
    #[arg(long, value_name = "S", default_value_t = 1)]
    seed: u64,
    /// How many seeds to run.
    #[arg(long, value_name = "M", default_value_t = 1)]
    seeds: u64,
    /// Joiners per run (with --vary: per 64 members, at least 1).
    #[arg(long, value_name = "J", default_value_t = 16)]
    joins: u32,
    /// Contacts each joiner may ask (0: every joiner asks the same member).
    #[arg(long, value_name = "C", default_value_t = 3)]
    contacts: u32,
    /// Joiners start spread uniformly over this many ms.
    #[arg(long, value_name = "MS", default_value_t = 1_000)]
    skew_ms: u64,
    /// Members (some joiner's first contact) crashing while joins go on.
    #[arg(long, value_name = "N", default_value_t = 0)]
    contact_crashes: u32,
    /// The coordinator (rank 0) crashes while joins go on.
    #[arg(long)]
    crash_coordinator: bool,
    /// Joiners whose process crashes while joins go on (before or after admission).
    #[arg(long, value_name = "N", default_value_t = 0)]
    joiner_crashes: u32,
    /// CPU-starved members: frozen 20-150 ms at a time through the join window; must not be
    /// removed.
    #[arg(long, value_name = "N", default_value_t = 0)]
    starved: u32,
    /// The launched members start spread uniformly over this many ms and form view 0 from
    /// check-ins (every live member must be ready once, at one epoch).
    #[arg(long, value_name = "MS", default_value_t = 0)]
    launch_skew_ms: u64,
    /// Each seed draws its own shape: members log-uniform in 24..=--ranks, joins scaled to
    /// them, and its faults (contact crashes, a coordinator crash, joiner crashes, starved
    /// members, one contact for all) from the seed.
    #[arg(long)]
    vary: bool,
    /// Print one line per simulator event to stdout (one seed only).
    #[arg(long)]
    trace: bool,
    /// Print the result as one JSON line (the last line of stdout) instead of a summary.
    #[arg(long)]
    json: bool,
}

impl ElasticArgs {
    /// The run of `seed`: the arguments as given, or (with --vary) a shape drawn from it.
    fn params(&self, seed: u64) -> ElasticParams {
        let mut p = ElasticParams::new(self.ranks, self.radix, seed, self.joins);
        p.contacts = self.contacts;
        p.skew_ms = self.skew_ms;
        p.contact_crashes = self.contact_crashes;
        p.crash_coordinator = self.crash_coordinator;
        p.joiner_crashes = self.joiner_crashes;
        p.starved = self.starved;
        p.launch_skew_ms = self.launch_skew_ms;
        if self.vary {
            p = ElasticParams::varied(self.radix, seed, self.ranks.max(24), self.joins);
        }
        p
    }
}

/// Runs `lifeline sim elastic`.
pub(crate) fn run(args: &ElasticArgs) -> Result<(), CliError> {
    if args.seeds == 0 {
        return Err(CliError::Usage("--seeds must be at least 1".into()));
    }
    if args.trace && args.seeds > 1 {
        return Err(CliError::Usage(
            "--trace replays one seed: drop --seeds".into(),
        ));
    }
    let start = Instant::now();
    let mut t = Totals::default();
    for seed in args.seed..args.seed.saturating_add(args.seeds) {
        let p = args.params(seed);
        let (r, _) = run_scenario(args.trace, "sim elastic", |hooks| run_elastic(&p, hooks))?;
        t.add(&p, r);
    }
    let wall = start.elapsed().as_secs_f64();
    let [j50, j99, jmax] = MembershipSummary::percentiles(&t.join_ms);
    write_stdout(|out| {
        if args.json {
            writeln!(
                out,
                r#"{{"runs":{},"ranks_max":{},"joins":{},"joins_admitted":{},"joins_missing":{},"join_ms_p50":{j50:.3},"join_ms_p99":{j99:.3},"join_ms_max":{jmax:.3},"join_tries":{},"join_view_changes":{},"startup_view_changes_max":{},"ready_ms_max":{:.1},"never_joined":{},"mixed_replies":{},"wrongful_evictions":{},"violations":{},"wall_ms":{:.1}}}"#,
                t.runs,
                t.ranks_max,
                t.joins,
                t.admitted,
                t.missing,
                t.tries,
                t.views,
                t.startup_views,
                t.ready_ms,
                t.never_joined,
                t.mixed,
                t.wrongful,
                t.failing.len(),
                wall * 1e3
            )
        } else {
            writeln!(
                out,
                "elastic: {} runs (up to {} members): {} joiners, {} admitted, {} live ones missing, join p50 {j50:.1} ms, p99 {j99:.1} ms, max {jmax:.1} ms, {} tries, {} admitting view changes, start-up in at most {} check-in view changes (last ready {:.0} ms), {} mixed-up replies, {} wrongful evictions; {} ({wall:.1} s)",
                t.runs,
                t.ranks_max,
                t.joins,
                t.admitted,
                t.missing,
                t.tries,
                t.views,
                t.startup_views,
                t.ready_ms,
                t.mixed,
                t.wrongful,
                if t.failing.is_empty() { "ok".to_string() } else { format!("BROKEN in {} runs", t.failing.len()) },
            )
        }
    })?;
    if t.failing.is_empty() {
        Ok(())
    } else {
        Err(CliError::Failed(format!(
            "sim elastic broke its oracle in {} of {} runs:\n  {}",
            t.failing.len(),
            t.runs,
            t.failing.join("\n  ")
        )))
    }
}

/// Many runs merged.
#[derive(Default)]
struct Totals {
    runs: u64,
    ranks_max: u32,
    joins: u64,
    admitted: u64,
    missing: u64,
    tries: u64,
    views: u64,
    mixed: u64,
    wrongful: u64,
    startup_views: u64,
    ready_ms: f64,
    never_joined: u64,
    join_ms: Vec<f64>,
    failing: Vec<String>,
}

impl Totals {
    fn add(&mut self, p: &ElasticParams, r: ElasticReport) {
        self.runs += 1;
        self.ranks_max = self.ranks_max.max(p.ranks);
        self.joins += u64::from(r.joins);
        self.admitted += u64::from(r.joins_admitted);
        self.missing += u64::from(r.joins_missing);
        self.tries += r.join_tries;
        self.views += u64::from(r.join_views);
        self.mixed += u64::from(r.mixed_replies);
        self.wrongful += u64::from(r.wrongful_evictions);
        self.startup_views = self.startup_views.max(r.startup_view_changes);
        self.ready_ms = self.ready_ms.max(r.ready_ms);
        self.never_joined += u64::from(r.never_joined);
        let v = r.all_violations();
        if !v.is_empty() {
            self.failing.push(format!(
                "seed {}: {:?}; replay: {}",
                p.seed,
                v,
                p.replay_command()
            ));
        }
        self.join_ms.extend(r.join_ms);
    }
}
