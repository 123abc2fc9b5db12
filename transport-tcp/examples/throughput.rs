//! Frame throughput between two TCP nodes on loopback, against a raw tokio length-prefixed
//! baseline in the same run (the issue-6 benchmark, kept here until it moves to `bench`).
//!
//! ```sh
//! cargo run --release -p lifeline-transport-tcp --example throughput            # 64 B and 64 KiB
//! cargo run --release -p lifeline-transport-tcp --example throughput -- 4096    # one size
//! ```
//!
//! The adapter path is the whole stack: node 0's application floods `size`-byte payloads
//! (the core encodes them), the adapter queues and writes them on the data connection, node 1's
//! adapter frames them, its core decodes and de-duplicates them, and its application receives
//! one event per frame. The raw path writes `u32 length + payload` through a 256 KiB
//! `BufWriter` and reads it back with a 256 KiB `BufReader` into one allocation per frame.
//! One JSON line per size: `{"size", "adapter_mb_s", "raw_mb_s", "ratio", "adapter_msgs_s",
//! "raw_msgs_s"}` (MB/s of payload).

use std::time::{Duration, Instant as StdInstant};

use bytes::{Bytes, BytesMut};
use lifeline_core::tree::Rank;
use lifeline_core::{Config, Event, Instant, Node};
use lifeline_transport_tcp::{spawn, AddressBook, ClusterKey, Output, TcpConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader, BufWriter};
use tokio::net::TcpListener;

fn frames_for(size: usize) -> u64 {
    // About 1 GB or 2 M frames, whichever is fewer.
    ((1usize << 30) / size.max(1)).clamp(1000, 2_000_000) as u64
}

async fn adapter(size: usize, frames: u64) -> Duration {
    let l0 = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let l1 = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let mut book = AddressBook::new();
    book.insert(Rank(0), l0.local_addr().unwrap());
    book.insert(Rank(1), l1.local_addr().unwrap());
    let key = ClusterKey::from_secret(b"bench").unwrap();
    let mut cfg = Config::new(2, 2);
    cfg.max_frame = (size + 1024).max(1 << 20) as u32;
    // The flood test protocol de-duplicates by scanning every remembered id; frames here are
    // never duplicated, so remember few and measure the transport rather than that scan.
    cfg.max_floods = 8;
    let node = |r| Node::new(cfg.clone(), Rank(r), 7, Instant::ZERO).unwrap();
    let n0 = spawn(node(0), book.clone(), key.clone(), TcpConfig::default(), l0);
    let mut n1 = spawn(node(1), book, key, TcpConfig::default(), l1);
    while let Some(o) = n1.outputs.recv().await {
        if matches!(o, Output::LinkUp { .. }) {
            break;
        }
    }
    let payload = Bytes::from(vec![0xab; size]);
    let batch = (256 * 1024 / size.max(1)).clamp(1, 4096) as u64;
    let start = StdInstant::now();
    let sender = {
        let h = n0.handle.clone();
        tokio::spawn(async move {
            let mut sent = 0u64;
            while sent < frames {
                let k = batch.min(frames - sent);
                let p = payload.clone();
                let r = h
                    .command(move |n, now| {
                        for _ in 0..k {
                            n.flood(now, p.clone()).unwrap();
                        }
                    })
                    .await;
                match r {
                    Ok(()) => sent += k,
                    Err(_) => tokio::time::sleep(Duration::from_micros(200)).await,
                }
            }
        })
    };
    let mut got = 0u64;
    while got < frames {
        match n1.outputs.recv().await {
            Some(Output::Event(Event::FloodDelivered { .. })) => got += 1,
            Some(_) => {}
            None => panic!("node 1 stopped"),
        }
    }
    let took = start.elapsed();
    sender.await.unwrap();
    n0.handle.shutdown().await;
    n1.handle.shutdown().await;
    took
}

async fn raw(size: usize, frames: u64) -> Duration {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let (s, _) = l.accept().await.unwrap();
        s.set_nodelay(true).unwrap();
        let mut r = BufReader::with_capacity(256 << 10, s);
        for _ in 0..frames {
            let len = r.read_u32().await.unwrap() as usize;
            let mut b = BytesMut::with_capacity(len);
            b.resize(len, 0);
            r.read_exact(&mut b).await.unwrap();
            std::hint::black_box(b.freeze());
        }
    });
    let s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.set_nodelay(true).unwrap();
    let payload = vec![0xab; size];
    let start = StdInstant::now();
    let mut w = BufWriter::with_capacity(256 << 10, s);
    for _ in 0..frames {
        w.write_u32(size as u32).await.unwrap();
        w.write_all(&payload).await.unwrap();
    }
    w.flush().await.unwrap();
    server.await.unwrap();
    start.elapsed()
}

fn main() {
    let sizes: Vec<usize> = match std::env::args().nth(1) {
        Some(s) => vec![s.parse().expect("size in bytes")],
        None => vec![64, 64 << 10],
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    for size in sizes {
        let frames = frames_for(size);
        let a = rt.block_on(adapter(size, frames));
        let r = rt.block_on(raw(size, frames));
        let per_s = |d: Duration| frames as f64 / d.as_secs_f64();
        let mb_s = |d: Duration| per_s(d) * size as f64 / 1e6;
        println!(
            "{{\"size\":{size},\"adapter_mb_s\":{:.1},\"raw_mb_s\":{:.1},\"ratio\":{:.3},\"adapter_msgs_s\":{:.0},\"raw_msgs_s\":{:.0}}}",
            mb_s(a),
            mb_s(r),
            r.as_secs_f64() / a.as_secs_f64(),
            per_s(a),
            per_s(r)
        );
    }
}
