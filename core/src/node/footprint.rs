//! What a node costs in memory, per part: a guard against regressions. A simulated cluster of
//! 2^20 nodes must stay within 2.5 GiB for a flood and 3 GiB for an xcast (the `scale flood` and
//! `scale xcast` benches measure the whole process); the inline sizes below are most of it.
//! Run with `--nocapture` to print the table. Joins and corroboration keep their state, and
//! their counters ([`crate::join::JoinStats`], [`crate::CorroborationStats`]), in boxes made on
//! first use: a node that never needs them pays 8 bytes each. (Their six counters sat inline in
//! `Stats` for a while, 48 bytes on every node, and the node's bound had gone up to 2,240 B: at
//! 2^20 ranks the flood passed 2.5 GiB. The admitted span fits in the membership's padding; the
//! grow an admission defers costs the node 8 bytes; the membership's batch and decide timers
//! each keep token and deadline in one option, 16 bytes less than two options each.)

use std::mem::size_of;

use crate::config::Config;
use crate::detect::Detector;
use crate::flood::Flood;
use crate::membership::Membership;
use crate::relm::Relm;
use crate::revoke::Revoke;
use crate::stats::Stats;
use crate::timer::Timers;
use crate::tree::Tree;
use crate::xcast::Xcast;

#[test]
fn inline_sizes_stay_bounded() {
    let parts = [
        ("node (all)", size_of::<super::Node>(), 2_200),
        ("  flood", size_of::<Flood>(), 96),
        ("  membership", size_of::<Membership>(), 512),
        // 288: the op held while a leaving rank drains (shrink campaigns, #22).
        ("  xcast", size_of::<Xcast>(), 288),
        ("  relm", size_of::<Relm>(), 300),
        ("  detect (off: absent)", size_of::<Detector>(), 8),
        ("  revoke (boxed on first use)", size_of::<Revoke>(), 8),
        ("  stats", size_of::<Stats>(), 640),
        ("  tree", size_of::<Tree>(), 176),
        ("  timers", size_of::<Timers>(), 64),
        (
            "config (shared, not per node)",
            size_of::<Config>(),
            usize::MAX,
        ),
    ];
    for (name, bytes, _) in parts {
        eprintln!("{name:32} {bytes:>5} B");
    }
    for (name, bytes, max) in parts {
        assert!(bytes <= max, "{name}: {bytes} B, over its bound of {max} B");
    }
}
