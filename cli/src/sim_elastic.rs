//! `lifeline sim elastic`: joiners joining a running simulated cluster (start skew, one or many
//! contacts, contacts and the coordinator crashing mid-join, joiners crashing, CPU-starved
//! members) over one or many seeds, with the scenario's oracle verdict and join latencies.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use clap::Args;
use lifeline_core::sim::scenario::elastic::{run_elastic, ElasticParams, ElasticReport};
use lifeline_core::sim::scenario::membership::MembershipSummary;
use lifeline_core::sim::Hooks;

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
    /// `join.remembered` at every member (admitted nonces each keeps; default 8192).
    #[arg(long, value_name = "N")]
    join_remembered: Option<u32>,
    /// Each seed draws its own shape: members log-uniform in 24..=--ranks, joins scaled to
    /// them, and its faults (contact crashes, a coordinator crash, joiner crashes, starved
    /// members, one contact for all) from the seed.
    #[arg(long)]
    vary: bool,
    /// Seeds run at once, each on its own thread (the summary is the same for any number).
    #[arg(long, value_name = "N", default_value_t = 1)]
    jobs: u32,
    /// Print one JSON line per seed as it finishes (seed, ranks, joiners, verdict, wall ms).
    #[arg(long)]
    each: bool,
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
        p.remembered = self.join_remembered;
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
    if args.jobs == 0 {
        return Err(CliError::Usage("--jobs must be at least 1".into()));
    }
    let start = Instant::now();
    let mut t = Totals::default();
    if args.seeds == 1 {
        let p = args.params(args.seed);
        let (r, wall) = run_scenario(args.trace, "sim elastic", |hooks| run_elastic(&p, hooks))?;
        if args.each {
            each_line(&p, &Ok(r.clone()), wall.as_secs_f64(), None)?;
        }
        t.add(&p, Ok(r));
    } else {
        for (p, r) in sweep(args)? {
            t.add(&p, r);
        }
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
                crate::sim_cmd::sweep_verdict(&t.failing),
            )
        }
    })?;
    crate::sim_cmd::sweep_result("elastic", &t.failing, t.runs)
}

/// One seed's result: its report, or why the simulator stopped it (a livelock, a stuck run).
type Outcome = Result<ElasticReport, String>;

/// Runs every seed of `args` on `args.jobs` threads; the outcomes in seed order (so the
/// summary does not depend on the number of threads). A seed the simulator stops is a failing
/// seed, not the end of the sweep.
fn sweep(args: &ElasticArgs) -> Result<Vec<(ElasticParams, Outcome)>, CliError> {
    let seeds: Vec<u64> = (args.seed..args.seed.saturating_add(args.seeds)).collect();
    let next = AtomicU64::new(0);
    let done: Mutex<Vec<Option<(ElasticParams, Outcome)>>> =
        Mutex::new((0..seeds.len()).map(|_| None).collect());
    let failed: Mutex<Option<CliError>> = Mutex::new(None);
    let jobs = (args.jobs as usize).min(seeds.len());
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed) as usize;
                let Some(&seed) = seeds.get(i) else {
                    break;
                };
                let p = args.params(seed);
                let begun = Instant::now();
                let cpu = thread_cpu_s();
                let r = run_elastic(&p, Hooks::default()).map_err(|e| e.reason);
                let cpu = thread_cpu_s().zip(cpu).map(|(b, a)| b - a);
                if args.each {
                    if let Err(e) = each_line(&p, &r, begun.elapsed().as_secs_f64(), cpu) {
                        *failed.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
                    }
                }
                done.lock().unwrap_or_else(|e| e.into_inner())[i] = Some((p, r));
            });
        }
    });
    if let Some(e) = failed.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(e);
    }
    Ok(done
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .into_iter()
        .flatten()
        .collect())
}

/// CPU seconds this thread has used, where Linux says (`/proc/thread-self/stat`, in clock
/// ticks of 10 ms): on a shared machine a seed's wall time says little about its cost.
fn thread_cpu_s() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").ok()?;
    // After the command name (which may hold spaces), fields 3.. of proc(5): utime is 14th.
    let mut f = stat
        .get(stat.rfind(')')? + 1..)?
        .split_whitespace()
        .skip(11);
    let ticks = f.next()?.parse::<u64>().ok()? + f.next()?.parse::<u64>().ok()?;
    Some(ticks as f64 / 100.0)
}

/// `--each`: one JSON line for a finished seed (`cpu_ms`: the thread's CPU time where known).
fn each_line(
    p: &ElasticParams,
    r: &Outcome,
    wall_s: f64,
    cpu_s: Option<f64>,
) -> Result<(), CliError> {
    let violations = match r {
        Ok(r) => r.all_violations().len(),
        Err(_) => 1,
    };
    let cpu = cpu_s.map_or(String::new(), |c| format!(r#","cpu_ms":{:.0}"#, c * 1e3));
    write_stdout(|out| {
        writeln!(
            out,
            r#"{{"seed":{},"ranks":{},"joins":{},"violations":{violations},"wall_ms":{:.1}{cpu}}}"#,
            p.seed,
            p.ranks,
            p.joins,
            wall_s * 1e3
        )
    })
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
    fn add(&mut self, p: &ElasticParams, r: Outcome) {
        self.runs += 1;
        self.ranks_max = self.ranks_max.max(p.ranks);
        let r = match r {
            Ok(r) => r,
            Err(why) => {
                self.failing.push(format!(
                    "seed {}: the simulator stopped it: {why}; replay: {}",
                    p.seed,
                    p.replay_command()
                ));
                return;
            }
        };
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
