//! The fuzz target bodies under plain `cargo test`: seeded pseudo-random inputs (and any
//! corpus files under `fuzz/corpus/<target>/`), so a property broken by an ordinary change
//! fails CI without a fuzzing campaign.

use std::path::Path;

use lifeline_core::wire::{Kind, VERSION};

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
fn qp_details_replays() {
    for d in inputs(3, 20_000, 48)
        .into_iter()
        .chain(corpus("qp_details"))
    {
        lifeline_fuzz::qp_details(&d);
    }
    // Records of the right length and version, so decoding gets past the first checks.
    for mut d in inputs(4, 20_000, 36).into_iter().filter(|d| d.len() == 36) {
        d[0] = lifeline_transport_rdma::wire::DETAILS_VERSION;
        lifeline_fuzz::qp_details(&d);
    }
    for mut d in inputs(5, 2_000, 0).into_iter().map(|_| vec![0u8; 36]) {
        d[0] = lifeline_transport_rdma::wire::DETAILS_VERSION;
        d[27] = 3;
        lifeline_fuzz::qp_details(&d);
    }
}

#[test]
fn decode_replays() {
    for d in inputs(1, 20_000, 64).into_iter().chain(corpus("decode")) {
        lifeline_fuzz::decode(&d);
    }
    // Correct envelopes too, not only noise: any kind byte (known or not) around random bodies,
    // and every kind of the message table around random bodies of every length up to 64.
    let envelope = |kind: u8, body: &[u8]| {
        let mut f = vec![VERSION, kind];
        f.extend_from_slice(&(body.len() as u32).to_be_bytes());
        f.extend_from_slice(body);
        f
    };
    for d in inputs(2, 2_000, 40) {
        lifeline_fuzz::decode(&envelope(d.first().copied().unwrap_or(1), &d));
    }
    for kind in Kind::all() {
        for d in inputs(5 + u64::from(kind.byte()), 300, 64) {
            lifeline_fuzz::decode(&envelope(kind.byte(), &d));
        }
    }
}

#[test]
fn node_frames_reach_every_kind_in_the_table() {
    // The node target's envelope-around-garbage step takes its kind byte from frame_kind: every
    // kind of the message table must be reachable, and the bytes below 32 keep their meaning.
    for kind in Kind::all() {
        assert!(
            (0..=u8::MAX).any(|b| lifeline_fuzz::frame_kind(b) == kind.byte()),
            "kind {} ({}) unreachable by the node target's Frame step",
            kind.byte(),
            kind.name()
        );
    }
    for b in 0..=u8::MAX {
        let k = lifeline_fuzz::frame_kind(b);
        if b < 32 {
            assert_eq!(k, b);
        } else {
            assert!(Kind::from_u8(k).is_some(), "{b} -> {k}");
            if Kind::from_u8(b % 32).is_some() {
                assert_eq!(k, b % 32, "a corpus byte that named a kind still names it");
            }
        }
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
fn tcp_handshake_replays() {
    for d in inputs(6, 5_000, 200)
        .into_iter()
        .chain(corpus("tcp_handshake"))
    {
        lifeline_fuzz::tcp_handshake(&d);
    }
}

#[test]
fn relm_sim_replays() {
    for d in inputs(4, 60, 24).into_iter().chain(corpus("relm_sim")) {
        lifeline_fuzz::relm_sim(&d);
    }
}
