use lifeline_core::sim::relm::{run_relm, RelmHooks, RelmParams};
use lifeline_core::tree::Rank;
fn main() {
    let a: Vec<String> = std::env::args().collect();
    let seed: u64 = a.get(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let p = RelmParams { ranks: 40, radix: 3, messages: 400, crash: 0.05, seed, burst: false };
    let hooks = RelmHooks {
        trace: None,
        progress: Some(Box::new(|w| {
            let mut line = format!("t={} ", w.now());
            for r in 0..w.span() {
                if let Some(n) = w.node(Rank(r)) {
                    if w.is_crashed(Rank(r)) { continue; }
                    let s = n.stats();
                    if n.relm_held() > 0 {
                        line += &format!("[{r} held={} fo={} rp={} rq={} dup={} st={} lu={} rej={} gto={} retry={}] ", n.relm_held(), s.relm_frames_out, s.relm_replays, s.relm_requests, s.relm_duplicates, s.relm_stale, s.relm_link_updates, s.relm_link_rejected, s.relm_gate_timeouts, s.relm_retry_probes);
                    }
                }
            }
            eprintln!("{line}");
            if let Some(n) = w.node(Rank(23)) { let d = format!("{n:?}"); let i = d.find("relm:").unwrap_or(0); eprintln!("{}", &d[i..(i+1500).min(d.len())]); eprintln!("view {:?} dead {}", n.tree().view().map(|v| (v.parent(), v.depth())), n.tree().dead()); }
        })),
        progress_every: 8_000_000,
    };
    match run_relm(&p, hooks) { Ok(r) => println!("{r:?}"), Err(e) => println!("{e}") }
}
