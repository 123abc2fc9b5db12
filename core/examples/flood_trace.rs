//! Prints the trace of a small faulty flood run (`cargo run -p lifeline-core --features sim
//! --example flood_trace -- SEED`).
use lifeline_core::sim::scenario::flood::{run_flood, FloodParams};
use lifeline_core::sim::Hooks;

fn main() {
    let seed = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(42);
    let p = FloodParams {
        ranks: 20,
        radix: 2,
        seed,
        faults: true,
    };
    let hooks = Hooks {
        trace: Some(Box::new(|l: &str| println!("{l}"))),
        ..Hooks::default()
    };
    match run_flood(&p, hooks) {
        Ok(r) => println!("{r:?}"),
        Err(e) => println!("{e}"),
    }
}
