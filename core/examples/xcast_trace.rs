//! Prints the trace of an xcast run (`cargo run -p lifeline-core --features sim --example
//! xcast_trace -- RANKS RADIX OPS CRASH SEED ROOT_ORIGIN`).
use lifeline_core::sim::scenario::xcast::{run_xcast, XcastParams};
use lifeline_core::sim::Hooks;

fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let get = |i: usize, d: &str| a.get(i).cloned().unwrap_or_else(|| d.to_owned());
    let p = XcastParams {
        ranks: get(0, "60").parse().unwrap(),
        radix: get(1, "3").parse().unwrap(),
        ops: get(2, "12").parse().unwrap(),
        crash: get(3, "0.05").parse().unwrap(),
        seed: get(4, "2").parse().unwrap(),
        root_origin: get(5, "false").parse().unwrap(),
    };
    let hooks = Hooks {
        trace: Some(Box::new(|l: &str| println!("{l}"))),
        ..Hooks::default()
    };
    match run_xcast(&p, hooks) {
        Ok(r) => println!("{r:?}"),
        Err(e) => println!("{e}"),
    }
}
