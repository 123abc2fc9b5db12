//! The child process: a node of the suite's cluster in its own process, killed, paused or
//! moved into a network namespace by the parent, reporting its link changes on stdout.

use std::io::{BufRead, BufReader};
use std::process::Child;

use super::*;

/// A node of `spec` in a child process, killed by the parent with a real signal. `links`
/// receives the child's link changes (`("up" | "down", peer)`) with the time they were read.
pub(crate) struct ChildNode(
    pub(crate) Child,
    pub(crate) std::sync::mpsc::Receiver<(String, u32, StdInstant)>,
);

impl Drop for ChildNode {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).expect("hex"))
        .collect()
}

/// Starts `rank` in a child process (via [`Transport::child_command`]) and waits until it
/// listens.
pub(crate) fn spawn_child<T: Transport>(spec: &Spec, rank: Rank, book: &Book) -> ChildNode {
    spawn_child_in::<T>(spec, rank, book, None)
}

/// [`spawn_child`], optionally inside network namespace `netns` (`ip netns exec`).
pub(crate) fn spawn_child_in<T: Transport>(
    spec: &Spec,
    rank: Rank,
    book: &Book,
    netns: Option<&str>,
) -> ChildNode {
    let book_s: Vec<String> = book.iter().map(|(r, a)| format!("{}@{a}", r.0)).collect();
    let env = format!(
        "span={};radix={};rank={};timeout_ms={};secret={};book={}",
        spec.span,
        spec.radix,
        rank.0,
        spec.link_timeout.as_millis(),
        hex(&spec.secret),
        book_s.join(",")
    );
    let mut cmd = T::child_command();
    if let Some(ns) = netns {
        let mut wrapped = Command::new("ip");
        wrapped
            .args(["netns", "exec", ns])
            .arg(cmd.get_program())
            .args(cmd.get_args());
        for (k, v) in cmd.get_envs() {
            if let Some(v) = v {
                wrapped.env(k, v);
            }
        }
        cmd = wrapped;
    }
    let mut child = cmd
        .env(CHILD_ENV, env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn the child node");
    let out = child.stdout.take().expect("child stdout");
    let (ready_tx, ready) = std::sync::mpsc::channel();
    let (links_tx, links) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            if line.contains("conformance-child-ready") {
                let _ = ready_tx.send(());
            } else if let Some(rest) = line.split("conformance-link ").nth(1) {
                let mut it = rest.split_whitespace();
                if let (Some(what), Some(Ok(peer))) = (it.next(), it.next().map(str::parse)) {
                    let _ = links_tx.send((what.to_string(), peer, StdInstant::now()));
                }
            }
        }
    });
    let child = ChildNode(child, links);
    ready
        .recv_timeout(Duration::from_secs(30))
        .expect("the child node did not start within 30 s");
    child
}

/// The child side of [`sigkill_link_down`]: when the suite's environment variable is set,
/// runs one node until killed (or until its stdin closes, so it never outlives the test);
/// otherwise returns at once. Call it from a `#[test] fn conformance_child()`.
pub fn child_main<T: Transport>() {
    let Ok(env) = std::env::var(CHILD_ENV) else {
        return;
    };
    let mut kv = BTreeMap::new();
    for part in env.split(';') {
        if let Some((k, v)) = part.split_once('=') {
            kv.insert(k.to_string(), v.to_string());
        }
    }
    let num = |k: &str| -> u64 { kv[k].parse().expect("number") };
    let spec = Spec {
        span: num("span") as u32,
        radix: num("radix") as u32,
        secret: unhex(&kv["secret"]),
        link_timeout: Duration::from_millis(num("timeout_ms")),
        joiner: false,
    };
    let rank = Rank(num("rank") as u32);
    let mut book = Book::new();
    for e in kv["book"].split(',') {
        let (r, a) = e.split_once('@').expect("rank@addr");
        book.insert(Rank(r.parse().expect("rank")), a.parse().expect("addr"));
    }
    std::thread::spawn(|| {
        let mut sink = String::new();
        while std::io::stdin().read_line(&mut sink).is_ok_and(|n| n > 0) {}
        std::process::exit(0);
    });
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let (ep, _) = T::bind(book[&rank]).await;
        let mut node = T::start(&spec, rank, &book, ep).await;
        println!("conformance-child-ready");
        loop {
            while let Some(o) = node.try_next() {
                match o {
                    Observed::LinkUp(p) => println!("conformance-link up {}", p.0),
                    Observed::LinkDown(p) => println!("conformance-link down {}", p.0),
                    Observed::Event(_) => {}
                }
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    });
}
