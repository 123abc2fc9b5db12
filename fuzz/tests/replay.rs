//! The fuzz target bodies under plain `cargo test`: seeded pseudo-random inputs (and any
//! corpus files under `fuzz/corpus/<target>/`), so a property broken by an ordinary change
//! fails CI without a fuzzing campaign.

use std::path::Path;

/// Deterministic input bytes (xorshift64*), lengths up to `max`.
fn inputs(seed: u64, count: usize, max: usize) -> Vec<Vec<u8>> {
    let mut x = seed | 1;
    let mut next = move || {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    };
    (0..count)
        .map(|_| {
            let len = (next() as usize) % (max + 1);
            (0..len).map(|_| next() as u8).collect()
        })
        .collect()
}

/// Files of a target's corpus, if a campaign left one.
fn corpus(target: &str) -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join(target);
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(|e| std::fs::read(e.ok()?.path()).ok())
        .collect()
}

#[test]
fn decode_replays() {
    for d in inputs(1, 20_000, 64).into_iter().chain(corpus("decode")) {
        lifeline_fuzz::decode(&d);
    }
    // Valid frames too, not only noise: every kind's sample must round-trip.
    for d in inputs(2, 2_000, 40) {
        let mut f = vec![
            lifeline_core::wire::VERSION,
            d.first().copied().unwrap_or(1) % 32,
        ];
        f.extend_from_slice(&(d.len() as u32).to_be_bytes());
        f.extend_from_slice(&d);
        lifeline_fuzz::decode(&f);
    }
}

#[test]
fn node_replays() {
    // Long inputs: each decodes into a long mixed stream of steps.
    for d in inputs(3, 2_000, 8_192).into_iter().chain(corpus("node")) {
        lifeline_fuzz::node(&d);
    }
}

#[test]
fn relm_sim_replays() {
    for d in inputs(4, 60, 24).into_iter().chain(corpus("relm_sim")) {
        lifeline_fuzz::relm_sim(&d);
    }
}
