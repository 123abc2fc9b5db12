//! The tests that signal child processes or cut their network: SIGSTOP/SIGCONT and a veth
//! partition between two network namespaces.

use super::*;
use crate::child::spawn_child_in;

fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "kill {sig} {pid} failed");
}

/// Sends SIGSTOP to `pid` and waits until every thread of it is stopped: the signal takes
/// effect asynchronously (on a loaded machine the process was seen running user code for
/// milliseconds after `kill` returned), and a test that acts "during the pause" must not race
/// it. Panics if the process is not stopped within 5 s.
fn stop(pid: u32) {
    signal(pid, "-STOP");
    let end = StdInstant::now() + Duration::from_secs(5);
    let stopped = || {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            return false;
        };
        tasks.flatten().all(|t| {
            std::fs::read_to_string(t.path().join("stat")).is_ok_and(|s| {
                // The state follows the command name, which is in parentheses.
                let state = s
                    .rsplit_once(')')
                    .and_then(|(_, rest)| rest.split_whitespace().next());
                matches!(state, Some("T" | "t"))
            })
        })
    };
    while !stopped() {
        assert!(
            StdInstant::now() < end,
            "process {pid} did not stop within 5 s of SIGSTOP"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The root runs in a child process and is paused with SIGSTOP for a third of the bound, then
/// resumed with SIGCONT: no link goes down anywhere (TCP keeps an idle or lightly loaded link up
/// while the kernel ACKs), and an xcast started during the pause completes after it.
pub async fn sigstop_shorter_than_bound<T: Transport>() {
    bounded("sigstop_shorter_than_bound", Duration::from_secs(60), async {
        let spec = Spec::new(3, 2);
        let (child, mut c) = root_in_child::<T>(&spec).await;
        xcast_reaches(&mut c, 1, &[1, 2], Duration::from_secs(10)).await;
        let pid = child.0.id();
        stop(pid);
        let pause = spec.link_timeout / 3;
        let payload = Bytes::from_static(b"during the pause");
        let p = payload.clone();
        retry(c.node(2), Duration::from_secs(5), move |n, now| {
            n.xcast(now, 16, p.clone()).expect("xcast accepted")
        })
        .await;
        let mut downs = Vec::new();
        let mut got = BTreeSet::new();
        let mut watch = |r: Rank, o: Observed| {
            match o {
                Observed::LinkDown(p) => downs.push((r, p)),
                Observed::Event(Event::Xcast(XcastEvent::Delivered { payload: q, .. })) if q == payload => {
                    got.insert(r);
                }
                _ => {}
            }
            got.len() == 2
        };
        c.pump(pause, |r, o| {
            watch(r, o);
            false
        })
        .await;
        signal(pid, "-CONT");
        let resumed = StdInstant::now();
        let ok = c.pump(Duration::from_secs(10), &mut watch).await;
        let took = resumed.elapsed();
        c.pump(Duration::from_millis(200), |r, o| {
            watch(r, o);
            false
        })
        .await;
        eprintln!("sigstop_shorter_than_bound: paused {pause:?}; xcast completed {took:?} after SIGCONT");
        assert!(
            ok,
            "the xcast started during the pause reached only {got:?} (links down: {downs:?})"
        );
        assert!(downs.is_empty(), "links went down during a short pause: {downs:?}");
        drop(child);
        c.stop().await;
    })
    .await;
}

/// Deletes the test's network namespaces.
struct Netns(Vec<String>);

impl Drop for Netns {
    fn drop(&mut self) {
        for n in &self.0 {
            let _ = Command::new("ip").args(["netns", "del", n]).status();
        }
    }
}

fn ip(args: &[&str]) -> bool {
    Command::new("ip")
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Two nodes in two network namespaces joined by a veth pair (addresses exist only inside the
/// namespaces this test makes and deletes). Once linked, one end of the veth goes down: no FIN
/// or RST reaches either node, like a host that vanished or a cut cable, so only the adapter's
/// timeouts can notice. Both nodes must report link-down within the bound (plus 1 s of
/// slack for probe alignment). Skipped, with a message, where namespaces cannot be created
/// (not root, no `ip`).
pub async fn partition_link_down<T: Transport>() {
    bounded("partition_link_down", Duration::from_secs(60), async {
        let tag = std::process::id() % 100_000;
        let (a, b) = (format!("llc{tag}a"), format!("llc{tag}b"));
        let (va, vb) = (format!("llc{tag}x"), format!("llc{tag}y"));
        if !ip(&["netns", "add", &a]) {
            eprintln!("partition_link_down: SKIPPED (cannot create a network namespace)");
            return;
        }
        let _guard = Netns(vec![a.clone(), b.clone()]);
        let net = 10 + tag % 200;
        let (ipa, ipb) = (format!("10.231.{net}.1"), format!("10.231.{net}.2"));
        let ok = ip(&["netns", "add", &b])
            && ip(&["link", "add", &va, "type", "veth", "peer", "name", &vb])
            && ip(&["link", "set", &va, "netns", &a])
            && ip(&["link", "set", &vb, "netns", &b])
            && ip(&["-n", &a, "addr", "add", &format!("{ipa}/24"), "dev", &va])
            && ip(&["-n", &b, "addr", "add", &format!("{ipb}/24"), "dev", &vb])
            && ip(&["-n", &a, "link", "set", &va, "up"])
            && ip(&["-n", &b, "link", "set", &vb, "up"])
            && ip(&["-n", &a, "link", "set", "lo", "up"])
            && ip(&["-n", &b, "link", "set", "lo", "up"]);
        if !ok {
            let _ = Command::new("ip").args(["link", "del", &va]).status();
            eprintln!("partition_link_down: SKIPPED (cannot set up the veth pair)");
            return;
        }
        let spec = Spec::new(2, 2);
        let mut book = Book::new();
        book.insert(Rank(0), format!("{ipa}:7000").parse().expect("addr"));
        book.insert(Rank(1), format!("{ipb}:7001").parse().expect("addr"));
        let n0 = spawn_child_in::<T>(&spec, Rank(0), &book, Some(&a));
        let n1 = spawn_child_in::<T>(&spec, Rank(1), &book, Some(&b));
        for (n, peer) in [(&n0, 1), (&n1, 0)] {
            let (what, p, _) = n.1.recv_timeout(Duration::from_secs(20)).expect("link up");
            assert_eq!((what.as_str(), p), ("up", peer));
        }
        let cut = StdInstant::now();
        assert!(
            ip(&["-n", &b, "link", "set", &vb, "down"]),
            "cutting the veth"
        );
        let limit = spec.link_timeout + Duration::from_secs(1);
        let mut seen = Vec::new();
        for (rank, n) in [(0, &n0), (1, &n1)] {
            let left =
                (cut + limit + Duration::from_secs(2)).saturating_duration_since(StdInstant::now());
            match n.1.recv_timeout(left) {
                Ok((what, _, at)) => {
                    assert_eq!(what, "down", "rank {rank}");
                    seen.push((rank, at - cut));
                }
                Err(_) => panic!("rank {rank} saw no link-down within {limit:?} of the cut"),
            }
        }
        eprintln!(
            "partition_link_down: link-down after {seen:?} (bound {:?})",
            spec.link_timeout
        );
        for (rank, d) in seen {
            assert!(
                d <= limit,
                "rank {rank} noticed the cut after {d:?}, over {limit:?}"
            );
        }
        drop((n0, n1));
    })
    .await;
}
