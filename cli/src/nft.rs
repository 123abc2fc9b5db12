//! Network faults for `lifeline cluster`, with nftables (the `nft` binary, run as root).
//!
//! One table per cluster run, `table inet lifeline_<pid>`, holds a set of the run's listening
//! endpoints (`eps`: every rank's `ip . port`) and one chain on the output hook. Loopback
//! traffic passes the output hook once per packet (a drop there is silent: no error reaches
//! the sender, whose TCP retransmits until `TCP_USER_TIMEOUT`; measured on Linux 6.x, where
//! input, prerouting and postrouting drops behave the same). Each fault is a few rules added
//! in one transaction when it starts and deleted by handle when it ends; the whole table is
//! deleted at the end of the run, on error, on Ctrl-C or SIGTERM, and when the guard is
//! dropped during a panic. A table left by a launcher that was killed outright is deleted by
//! the next run that uses nftables.
//!
//! A partition (`--partition`) is two named sets of addresses, `p<K>_side` (the set as given)
//! and `p<K>_rest` (every other rank), and four rules dropping what goes from one set to the
//! other: its size on the wire and in the kernel is one set element per rank, however the
//! ranks split (a `--cut` per pair would be |A|·|B| rules). The sets go in with the rules, in
//! one transaction, and come out with them.
//!
//! Every rule also requires that one end of the packet is one of the run's endpoints
//! (`ip saddr . tcp sport @eps` or `ip daddr . tcp dport @eps`: every connection between two
//! ranks has the acceptor's listening port at one end), so a rule never touches another
//! cluster that happens to use the same loopback addresses at the same time. With QUIC the
//! rules match UDP instead (`udp sport` / `udp dport`, the same set): each node has one UDP
//! socket bound to its listening endpoint and dials from it, so both ends of every datagram
//! between two ranks are endpoints of the run. A dropped datagram is as silent as a dropped
//! TCP segment; QUIC notices at its idle timeout.

use std::fmt::Write as _;
use std::io::Write as _;
use std::net::SocketAddr;
use std::process::Stdio;

use crate::CliError;

/// One network fault, by rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NetKind {
    /// Drop everything between two ranks, both ways.
    Cut(u32, u32),
    /// Drop the packets from the first rank to the second only.
    CutOneway(u32, u32),
    /// Drop everything to and from the rank (a silent host loss: no RST, no ICMP).
    Blackhole(u32),
    /// Drop this percentage of the rank's packets, both ways, at random per packet.
    Loss(u32, u32),
    /// Partition `K` (its ordinal among the run's partitions): drop everything between the
    /// addresses of set `p<K>_side` and those of `p<K>_rest`, both ways (see
    /// [`partition_sets`]).
    Partition(u32),
}

/// A named set of IPv4 addresses that a partition's rules refer to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct AddrSet {
    /// The set's name in the run's table (`p<K>_side`, `p<K>_rest`).
    pub(crate) name: String,
    /// Its elements.
    pub(crate) addrs: Vec<std::net::IpAddr>,
}

/// The two sets of partition `k`: the addresses of the ranks in `side`, and those of every
/// other rank at `eps` (rank R's listening endpoint at index R). Ranks sharing an address
/// (off Linux every rank is 127.0.0.1) cannot be split, so none is left out: an address on both
/// sides is in both sets, and its packets to itself are dropped too.
pub(crate) fn partition_sets(k: u32, side: &[u32], eps: &[SocketAddr]) -> [AddrSet; 2] {
    let mut inside: Vec<std::net::IpAddr> = Vec::new();
    let mut rest: Vec<std::net::IpAddr> = Vec::new();
    for (r, e) in eps.iter().enumerate() {
        let to = if side.contains(&(r as u32)) {
            &mut inside
        } else {
            &mut rest
        };
        if !to.contains(&e.ip()) {
            to.push(e.ip());
        }
    }
    [
        AddrSet {
            name: format!("p{k}_side"),
            addrs: inside,
        },
        AddrSet {
            name: format!("p{k}_rest"),
            addrs: rest,
        },
    ]
}

/// The transport protocol the rules match (the nodes' transport: TCP, or QUIC over UDP).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Proto {
    Tcp,
    Udp,
}

/// The bodies of the rules (after `add rule inet T out`) that inject `kind` among the ranks at
/// `eps` (rank R's listening endpoint at index R), matching `proto` packets.
pub(crate) fn rules(kind: NetKind, eps: &[SocketAddr], proto: Proto) -> Vec<String> {
    let ip = |r: u32| eps[r as usize].ip();
    // Either end of a packet of this run is a listening endpoint of it.
    let ours = match proto {
        Proto::Tcp => ["ip saddr . tcp sport @eps", "ip daddr . tcp dport @eps"],
        Proto::Udp => ["ip saddr . udp sport @eps", "ip daddr . udp dport @eps"],
    };
    let matches: Vec<String> = match kind {
        NetKind::Cut(a, b) => vec![format!(
            "ip saddr {{ {0}, {1} }} ip daddr {{ {0}, {1} }}",
            ip(a),
            ip(b)
        )],
        NetKind::CutOneway(a, b) => vec![format!("ip saddr {} ip daddr {}", ip(a), ip(b))],
        NetKind::Blackhole(r) | NetKind::Loss(r, _) => {
            vec![format!("ip saddr {}", ip(r)), format!("ip daddr {}", ip(r))]
        }
        NetKind::Partition(k) => vec![
            format!("ip saddr @p{k}_side ip daddr @p{k}_rest"),
            format!("ip saddr @p{k}_rest ip daddr @p{k}_side"),
        ],
    };
    let verdict = match kind {
        NetKind::Loss(_, pct) => format!("numgen random mod 100 < {pct} counter drop"),
        _ => "counter drop".to_string(),
    };
    let mut out = Vec::new();
    for m in &matches {
        for o in ours {
            out.push(format!("{m} {o} {verdict}"));
        }
    }
    out
}

/// The `nft` binary: `LIFELINE_NFT` if set, else on `PATH`, else where Debian puts it
/// (`/usr/sbin` is often not on a user's `PATH`).
fn nft_path() -> Option<std::path::PathBuf> {
    if let Some(p) = std::env::var_os("LIFELINE_NFT") {
        let p = std::path::PathBuf::from(p);
        return p.is_file().then_some(p);
    }
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join("nft"));
    on_path
        .chain(["/usr/sbin/nft", "/sbin/nft"].map(Into::into))
        .find(|p| p.is_file())
}

/// Runs `nft [args] -f -` with `script` on stdin; stdout, or stderr as the error.
fn run_sync(nft: &std::path::Path, args: &[&str], script: &str) -> Result<String, String> {
    let mut child = std::process::Command::new(nft)
        .args(args)
        .args(["-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("running {}: {e}", nft.display()))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(script.as_bytes())
            .map_err(|e| format!("writing to nft: {e}"))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|e| format!("waiting for nft: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
    }
}

/// The same, without blocking the runtime (faults are applied while the nodes talk).
async fn run_async(nft: &std::path::Path, args: &[&str], script: &str) -> Result<String, String> {
    use tokio::io::AsyncWriteExt;
    let mut child = tokio::process::Command::new(nft)
        .args(args)
        .args(["-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("running {}: {e}", nft.display()))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(script.as_bytes())
            .await
            .map_err(|e| format!("writing to nft: {e}"))?;
    }
    let out = child
        .wait_with_output()
        .await
        .map_err(|e| format!("waiting for nft: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
    }
}

/// This run's table; dropping it deletes the table (and so every rule still in it).
#[derive(Debug)]
pub(crate) struct Table {
    nft: std::path::PathBuf,
    name: String,
}

/// Whether process `pid` exists.
fn pid_exists(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

impl Table {
    /// Creates `table inet lifeline_<pid>` with the endpoint set and the output chain, after
    /// deleting tables left by launchers that no longer run. Fails with a message saying what
    /// to do when `nft` is missing or refuses (not root).
    pub(crate) fn create(eps: &[SocketAddr], flags: &str) -> Result<Self, CliError> {
        let fail = |why: String| {
            CliError::Failed(format!(
                "{flags} need nftables and root (CAP_NET_ADMIN): {why}"
            ))
        };
        if !cfg!(target_os = "linux") {
            return Err(fail("Linux only (a loopback address per rank)".into()));
        }
        let nft = nft_path().ok_or_else(|| {
            fail("the `nft` binary was not found (install the nftables package)".into())
        })?;
        Self::remove_stale(&nft);
        let name = format!("lifeline_{}", std::process::id());
        let mut elements = String::new();
        for (i, e) in eps.iter().enumerate() {
            let sep = if i == 0 { "" } else { ", " };
            let _ = write!(elements, "{sep}{} . {}", e.ip(), e.port());
        }
        // Any rule left from an earlier run with this pid goes first (`add` then `delete` so
        // that deleting never fails), then the table is made afresh in the same transaction.
        let script = format!(
            "add table inet {name}\ndelete table inet {name}\n\
             table inet {name} {{\n\
             \x20 set eps {{\n\
             \x20   type ipv4_addr . inet_service\n\
             \x20   elements = {{ {elements} }}\n\
             \x20 }}\n\
             \x20 chain out {{\n\
             \x20   type filter hook output priority 0; policy accept;\n\
             \x20 }}\n\
             }}\n"
        );
        run_sync(&nft, &[], &script).map_err(|e| fail(format!("nft: {e}")))?;
        tracing::debug!(table = name, "nftables table created");
        Ok(Self { nft, name })
    }

    /// The table's name (`lifeline_<pid>`).
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// Deletes `lifeline_<pid>` tables whose launcher is gone (killed outright: no cleanup ran).
    fn remove_stale(nft: &std::path::Path) {
        let Ok(out) = std::process::Command::new(nft)
            .args(["list", "tables"])
            .stderr(Stdio::null())
            .output()
        else {
            return;
        };
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let Some(name) = line.strip_prefix("table inet ") else {
                continue;
            };
            let pid = name.strip_prefix("lifeline_").and_then(|p| p.parse().ok());
            if pid.is_some_and(|p: u32| p != std::process::id() && !pid_exists(p)) {
                tracing::debug!(table = name, "deleting a stale nftables table");
                let _ = run_sync(nft, &[], &format!("delete table inet {name}\n"));
            }
        }
    }

    /// Adds the named `sets`, then `rules` (bodies, see [`rules`]), in one transaction; the
    /// rules' handles.
    pub(crate) async fn add(&self, sets: &[AddrSet], rules: &[String]) -> Result<Vec<u64>, String> {
        let mut script = String::new();
        for s in sets {
            let elements: Vec<String> = s.addrs.iter().map(ToString::to_string).collect();
            let _ = writeln!(
                script,
                "add set inet {} {} {{ type ipv4_addr; elements = {{ {} }}; }}",
                self.name,
                s.name,
                elements.join(", ")
            );
        }
        for r in rules {
            let _ = writeln!(script, "add rule inet {} out {r}", self.name);
        }
        let out = run_async(&self.nft, &["--echo", "--handle"], &script).await?;
        // Each added rule is echoed on its own line, ending in `# handle N`.
        let handles: Vec<u64> = out
            .lines()
            .filter(|l| l.starts_with("add rule "))
            .filter_map(|l| l.rsplit_once("# handle ")?.1.trim().parse().ok())
            .collect();
        if handles.len() == rules.len() {
            Ok(handles)
        } else {
            Err(format!("could not read the rule handles from nft: {out:?}"))
        }
    }

    /// Packets the rules with these handles dropped so far (their counters).
    pub(crate) async fn dropped(&self, handles: &[u64]) -> Result<u64, String> {
        let out = run_async(
            &self.nft,
            &["--handle"],
            &format!("list chain inet {} out\n", self.name),
        )
        .await?;
        Ok(out
            .lines()
            .filter(|l| {
                l.rsplit_once("# handle ")
                    .and_then(|(_, h)| h.trim().parse().ok())
                    .is_some_and(|h: u64| handles.contains(&h))
            })
            .filter_map(|l| {
                let after = l.split_once("counter packets ")?.1;
                after.split_whitespace().next()?.parse::<u64>().ok()
            })
            .sum())
    }

    /// Deletes the rules with these handles, then the named sets (which only they used), in
    /// one transaction.
    pub(crate) async fn delete(&self, handles: &[u64], sets: &[AddrSet]) -> Result<(), String> {
        let mut script = String::new();
        for h in handles {
            let _ = writeln!(script, "delete rule inet {} out handle {h}", self.name);
        }
        for s in sets {
            let _ = writeln!(script, "delete set inet {} {}", self.name, s.name);
        }
        run_async(&self.nft, &[], &script).await.map(drop)
    }
}

impl Drop for Table {
    fn drop(&mut self) {
        match run_sync(
            &self.nft,
            &[],
            &format!("delete table inet {}\n", self.name),
        ) {
            Ok(_) => tracing::debug!(table = self.name, "nftables table deleted"),
            Err(e) => eprintln!(
                "lifeline: could not delete nftables table inet {}: {e} (delete it with \
                 `nft delete table inet {}`)",
                self.name, self.name
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rule_bodies() {
        let eps: Vec<SocketAddr> = ["127.0.1.1:4000", "127.0.1.2:4001", "127.0.1.3:4002"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        assert_eq!(
            rules(NetKind::CutOneway(0, 2), &eps, Proto::Tcp),
            [
                "ip saddr 127.0.1.1 ip daddr 127.0.1.3 ip saddr . tcp sport @eps counter drop",
                "ip saddr 127.0.1.1 ip daddr 127.0.1.3 ip daddr . tcp dport @eps counter drop",
            ]
        );
        let cut = rules(NetKind::Cut(1, 2), &eps, Proto::Tcp);
        assert_eq!(cut.len(), 2);
        assert!(cut[0]
            .starts_with("ip saddr { 127.0.1.2, 127.0.1.3 } ip daddr { 127.0.1.2, 127.0.1.3 } "));
        assert_eq!(rules(NetKind::Blackhole(1), &eps, Proto::Tcp).len(), 4);
        let loss = rules(NetKind::Loss(0, 30), &eps, Proto::Tcp);
        assert_eq!(loss.len(), 4);
        assert!(loss
            .iter()
            .all(|r| r.ends_with("numgen random mod 100 < 30 counter drop")));
        assert!(loss[3].starts_with("ip daddr 127.0.1.1 ip daddr . tcp dport @eps"));
    }

    #[test]
    fn partition_rules_and_sets() {
        let eps: Vec<SocketAddr> = (0..512u32)
            .map(|r| format!("127.0.{}.{}:{}", 1 + r / 250, 1 + r % 250, 4000 + r))
            .map(|s| s.parse().unwrap())
            .collect();
        // Four rules whatever the split, 512 ranks included.
        let p = rules(NetKind::Partition(3), &eps, Proto::Tcp);
        assert_eq!(
            p,
            [
                "ip saddr @p3_side ip daddr @p3_rest ip saddr . tcp sport @eps counter drop",
                "ip saddr @p3_side ip daddr @p3_rest ip daddr . tcp dport @eps counter drop",
                "ip saddr @p3_rest ip daddr @p3_side ip saddr . tcp sport @eps counter drop",
                "ip saddr @p3_rest ip daddr @p3_side ip daddr . tcp dport @eps counter drop",
            ]
        );
        let side: Vec<u32> = (0..256).collect();
        let [a, b] = partition_sets(3, &side, &eps);
        assert_eq!((a.name.as_str(), b.name.as_str()), ("p3_side", "p3_rest"));
        assert_eq!((a.addrs.len(), b.addrs.len()), (256, 256));
        assert_eq!(a.addrs[0].to_string(), "127.0.1.1");
        assert_eq!(a.addrs[255].to_string(), "127.0.2.6");
        assert_eq!(b.addrs[0].to_string(), "127.0.2.7");
        assert!(a.addrs.iter().all(|x| !b.addrs.contains(x)));
        // Every rank is on exactly one side.
        let [a, b] = partition_sets(0, &[0], &eps[..16]);
        assert_eq!((a.addrs.len(), b.addrs.len()), (1, 15));
        // Ranks sharing an address (off Linux) are on both sides rather than on neither.
        let shared: Vec<SocketAddr> = (0..3u16)
            .map(|p| SocketAddr::from(([127, 0, 0, 1], 4000 + p)))
            .collect();
        let [a, b] = partition_sets(0, &[1], &shared);
        assert_eq!((a.addrs.len(), b.addrs.len()), (1, 1));
        assert!(rules(NetKind::Partition(0), &eps, Proto::Udp)
            .iter()
            .all(|r| r.contains("udp") && !r.contains("tcp")));
    }

    #[test]
    fn udp_rule_bodies() {
        let eps: Vec<SocketAddr> = ["127.0.1.1:4000", "127.0.1.2:4001", "127.0.1.3:4002"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        assert_eq!(
            rules(NetKind::CutOneway(0, 2), &eps, Proto::Udp),
            [
                "ip saddr 127.0.1.1 ip daddr 127.0.1.3 ip saddr . udp sport @eps counter drop",
                "ip saddr 127.0.1.1 ip daddr 127.0.1.3 ip daddr . udp dport @eps counter drop",
            ]
        );
        let cut = rules(NetKind::Cut(1, 2), &eps, Proto::Udp);
        assert_eq!(cut.len(), 2);
        assert!(cut[0]
            .starts_with("ip saddr { 127.0.1.2, 127.0.1.3 } ip daddr { 127.0.1.2, 127.0.1.3 } "));
        assert!(cut[1].ends_with("ip daddr . udp dport @eps counter drop"));
        assert_eq!(
            rules(NetKind::Blackhole(1), &eps, Proto::Udp),
            [
                "ip saddr 127.0.1.2 ip saddr . udp sport @eps counter drop",
                "ip saddr 127.0.1.2 ip daddr . udp dport @eps counter drop",
                "ip daddr 127.0.1.2 ip saddr . udp sport @eps counter drop",
                "ip daddr 127.0.1.2 ip daddr . udp dport @eps counter drop",
            ]
        );
        let loss = rules(NetKind::Loss(0, 30), &eps, Proto::Udp);
        assert_eq!(loss.len(), 4);
        assert!(loss
            .iter()
            .all(|r| r.ends_with("numgen random mod 100 < 30 counter drop")));
        assert!(loss[3].starts_with("ip daddr 127.0.1.1 ip daddr . udp dport @eps"));
        // No rule of either protocol mentions the other.
        assert!(loss.iter().all(|r| !r.contains("tcp")));
        assert!(rules(NetKind::Loss(0, 30), &eps, Proto::Tcp)
            .iter()
            .all(|r| !r.contains("udp")));
    }
}
