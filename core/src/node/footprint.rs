//! What a node costs in memory, per part: a guard against regressions. A simulated cluster of
//! 2^20 nodes must stay within 2.5 GiB for a flood and 3 GiB for an xcast (the `scale flood` and
//! `scale xcast` benches measure the whole process); the inline sizes below are most of it.
//! Run with `--nocapture` to print the table. (The node's bound went from 2,200 to 2,240 bytes
//! with joins and corroboration: their state is boxed on first use, but the admitted span, the
//! grow an admission defers and six counters are inline: about 24 MiB more at 2^20 ranks.)

use std::mem::size_of;

use crate::config::Config;
use crate::detect::Detector;
use crate::flood::Flood;
use crate::membership::Membership;
use crate::relm::Relm;
use crate::stats::Stats;
use crate::timer::Timers;
use crate::tree::Tree;
use crate::xcast::Xcast;

#[test]
fn inline_sizes_stay_bounded() {
    let parts = [
        ("node (all)", size_of::<super::Node>(), 2_240),
        ("  flood", size_of::<Flood>(), 96),
        ("  membership", size_of::<Membership>(), 512),
        ("  xcast", size_of::<Xcast>(), 280),
        ("  relm", size_of::<Relm>(), 300),
        ("  detect (off: absent)", size_of::<Detector>(), 8),
        // 640 until the six corroboration and overload counters (48 B) came.
        ("  stats", size_of::<Stats>(), 688),
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
