//! End-to-end tests of `lifeline decode`: valid frames, each kind of malformed input, and
//! seeded random bytes (which must give exit 0 or 2, never a panic).

use std::io::Write;
use std::process::{Command, Output, Stdio};

use bytes::Bytes;
use lifeline_core::tree::Rank;
use lifeline_core::wire::{FloodMsg, Message};

/// Runs `lifeline decode ARGS` with `input` on stdin (written from another thread, so a large
/// input cannot deadlock against a full stdout pipe; a write error after an early exit is fine).
fn decode(args: &[&str], input: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_lifeline"))
        .arg("decode")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run lifeline");
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    out
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Asserts success and a quiet stderr; returns the stdout lines.
fn ok(args: &[&str], input: &[u8]) -> Vec<String> {
    let out = decode(args, input);
    assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
    assert!(out.stderr.is_empty(), "{}", text(&out.stderr));
    text(&out.stdout).lines().map(str::to_owned).collect()
}

/// Asserts exit 2 and an error naming `needle`; returns (stdout lines, stderr).
fn bad(args: &[&str], input: &[u8], needle: &str) -> (Vec<String>, String) {
    let out = decode(args, input);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert!(stderr.contains(needle), "expected {needle:?} in {stderr:?}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let lines = text(&out.stdout).lines().map(str::to_owned).collect();
    (lines, stderr)
}

/// SplitMix64: a seeded generator, so every run tests the same inputs.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next() as u8).collect()
    }
}

fn flood_msg(origin: u32, id: u64, hops: u16, payload: &[u8]) -> FloodMsg {
    FloodMsg {
        origin: Rank(origin),
        id,
        hops,
        payload: Bytes::copy_from_slice(payload),
    }
}

fn random_msg(rng: &mut Rng) -> FloodMsg {
    let len = rng.below(80) as usize;
    let payload = rng.bytes(len);
    flood_msg(rng.next() as u32, rng.next(), rng.next() as u16, &payload)
}

/// The JSON line the decoder must print for `m`.
fn expected(m: &FloodMsg) -> String {
    let hex: String = m.payload.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        r#"{{"kind":"flood","origin":{},"id":{},"hops":{},"payload_len":{},"payload_hex":"{hex}"}}"#,
        m.origin.0,
        m.id,
        m.hops,
        m.payload.len()
    )
}

fn encode(m: &FloodMsg) -> Bytes {
    Message::Flood(m.clone()).encode()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn the_documented_example() {
    let m = flood_msg(3, 9, 2, b"lifeline");
    let want = r#"{"kind":"flood","origin":3,"id":9,"hops":2,"payload_len":8,"payload_hex":"6c6966656c696e65"}"#;
    assert_eq!(ok(&[], &encode(&m)), [want]);
    assert_eq!(ok(&["--hex"], hex(&encode(&m)).as_bytes()), [want]);
    let v: serde_json::Value = serde_json::from_str(want).unwrap();
    assert_eq!(v["payload_len"], 8);
}

/// A revoke notice prints its fields (the golden frame of `core/tests/golden/frames.hex`).
#[test]
fn a_revoke_notice() {
    let frame = "01320000001601020304050607080000000000000009000000050003";
    let want = r#"{"kind":"revoke","group":72623859790382856,"epoch":9,"origin":5,"hops":3}"#;
    assert_eq!(ok(&["--hex"], frame.as_bytes()), [want]);
}

#[test]
fn empty_input_prints_nothing() {
    assert!(ok(&[], b"").is_empty());
    assert!(ok(&["--hex"], b"").is_empty());
    assert!(ok(&["--hex"], b"\n  \n\t\r\n").is_empty());
}

#[test]
fn valid_streams_decode_in_order() {
    let mut rng = Rng(1);
    for round in 0..20 {
        let msgs: Vec<FloodMsg> = (0..1 + rng.below(12))
            .map(|_| random_msg(&mut rng))
            .collect();
        let want: Vec<String> = msgs.iter().map(expected).collect();
        let stream: Vec<u8> = msgs.iter().flat_map(|m| encode(m).to_vec()).collect();
        assert_eq!(ok(&[], &stream), want, "round {round}");
        // Hex: one frame per line, with blank lines, spaces, tabs, CRLF and mixed case.
        let mut lines = String::new();
        for m in &msgs {
            let h = hex(&encode(m));
            for (i, c) in h.chars().enumerate() {
                if rng.below(7) == 0 {
                    lines.push([' ', '\t'][i % 2]);
                }
                lines.push(if rng.below(2) == 0 {
                    c.to_ascii_uppercase()
                } else {
                    c
                });
            }
            lines.push_str(["\n", "\r\n", "\n\n", "\n \n"][rng.below(4) as usize]);
        }
        if rng.below(2) == 0 {
            // The last line may lack its newline.
            lines = lines.trim_end().to_owned();
        }
        assert_eq!(ok(&["--hex"], lines.as_bytes()), want, "round {round}");
    }
}

#[test]
fn a_large_stream_does_not_deadlock() {
    let mut rng = Rng(2);
    let msgs: Vec<FloodMsg> = (0..3000).map(|_| random_msg(&mut rng)).collect();
    let stream: Vec<u8> = msgs.iter().flat_map(|m| encode(m).to_vec()).collect();
    let got = ok(&[], &stream);
    assert_eq!(got.len(), msgs.len());
    assert_eq!(got[2999], expected(&msgs[2999]));
}

#[test]
fn valid_frame_then_garbage() {
    let m = flood_msg(7, 1, 0, b"ok");
    let f = encode(&m);
    let mut stream = f.to_vec();
    stream.extend_from_slice(&[0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 0]);
    let (lines, err) = bad(&[], &stream, "unsupported envelope version 222");
    assert_eq!(lines, [expected(&m)]);
    assert!(
        err.contains(&format!("frame 1 at byte offset {}", f.len())),
        "{err}"
    );

    let input = format!("{}\nnot hex\n", hex(&f));
    let (lines, err) = bad(&["--hex"], input.as_bytes(), "invalid hex digit 'n'");
    assert_eq!(lines, [expected(&m)]);
    let offset = hex(&f).len() + 1;
    assert!(
        err.contains(&format!("frame 1 (line 2) at byte offset {offset}")),
        "{err}"
    );
}

#[test]
fn each_kind_of_malformed_input_is_named() {
    let f = encode(&flood_msg(3, 9, 2, b"lifeline")).to_vec();
    let with = |i: usize, b: u8| {
        let mut v = f.clone();
        v[i] = b;
        v
    };
    // Binary stream.
    bad(
        &[],
        &f[..3],
        "frame 0 at byte offset 0: the stream ends inside the frame header (3 of 6",
    );
    bad(
        &[],
        &f[..20],
        "the stream ends inside the frame body (14 of 26 bytes)",
    );
    bad(&[], &with(0, 9), "unsupported envelope version 9");
    bad(&[], &with(1, 200), "unknown message kind 200");
    bad(&[], &with(2, 0x7f), "over the limit 1048576");
    bad(&["--max-frame", "31"], &f, "length 32 over the limit 31");
    assert_eq!(ok(&["--max-frame", "32"], &f).len(), 1);
    // The envelope says 26 body bytes, but the payload length inside says more.
    let mut inner = f.clone();
    inner[23] = 9;
    bad(&[], &inner, "truncated");
    // Hex lines.
    bad(
        &["--hex"],
        format!("{}00", hex(&f)).as_bytes(),
        "1 bytes after the end of the frame",
    );
    bad(
        &["--hex"],
        hex(&f[..20]).as_bytes(),
        "the line ends inside the frame body",
    );
    bad(&["--hex"], hex(&f[..3]).as_bytes(), "truncated");
    bad(
        &["--hex"],
        format!("{}0", hex(&f)).as_bytes(),
        "odd number of hex digits",
    );
    bad(&["--hex"], b"01\xff\n", "invalid byte 0xff");
    bad(
        &["--hex"],
        hex(&with(0, 2)).as_bytes(),
        "unsupported envelope version 2",
    );
    bad(
        &["--hex", "--max-frame", "20"],
        hex(&f).as_bytes(),
        "over the limit 20",
    );
    // A line far longer than --max-frame is refused without buffering all of it.
    let long = format!("{}{}", hex(&f), "00".repeat(1 << 20));
    bad(
        &["--hex", "--max-frame", "64"],
        long.as_bytes(),
        "more than --max-frame 64 bytes",
    );
    // Bad flags.
    for m in ["5", "0", "268435457", "x"] {
        let out = decode(&["--max-frame", m], &f);
        assert_eq!(out.status.code(), Some(2), "--max-frame {m}");
    }
}

/// Every output line of a run that did not panic must be a whole JSON object naming its kind
/// (random bytes may well spell a frame of another kind than flood).
fn check_random(args: &[&str], input: &[u8], what: &str) {
    let out = decode(args, input);
    let stderr = text(&out.stderr);
    assert!(!stderr.contains("panicked"), "{what}: {stderr}");
    match out.status.code() {
        Some(0) => assert!(stderr.is_empty(), "{what}: {stderr}"),
        Some(2) => assert!(
            stderr.starts_with("lifeline: error: frame "),
            "{what}: {stderr}"
        ),
        other => panic!("{what}: exit {other:?}, stderr {stderr}"),
    }
    for line in text(&out.stdout).lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(v["kind"].is_string(), "{what}: {line}");
    }
}

#[test]
fn random_bytes_never_panic() {
    let mut rng = Rng(0x5EED);
    let valid = encode(&flood_msg(1, 2, 3, b"payload!")).to_vec();
    for i in 0..300 {
        let len = rng.below(96) as usize;
        let mut input = rng.bytes(len);
        // Half the cases start with a plausible header, so the body checks are reached too.
        match i % 4 {
            0 => {}
            1 if input.len() >= 2 => input[..2].copy_from_slice(&[1, 1]),
            2 if input.len() >= 6 => {
                input[..2].copy_from_slice(&[1, 1]);
                let body = rng.below(len as u64) as u32;
                input[2..6].copy_from_slice(&body.to_be_bytes());
            }
            _ => {
                // A valid frame with one byte flipped, cut short, or followed by noise.
                input = valid.clone();
                match rng.below(3) {
                    0 => {
                        let at = rng.below(input.len() as u64) as usize;
                        input[at] ^= 1 << rng.below(8);
                    }
                    1 => input.truncate(rng.below(input.len() as u64) as usize),
                    _ => {
                        let n = 1 + rng.below(8) as usize;
                        input.extend(rng.bytes(n));
                    }
                }
            }
        }
        check_random(&[], &input, &format!("binary case {i}: {input:?}"));
    }
}

#[test]
fn random_hex_lines_never_panic() {
    let mut rng = Rng(0x4E7);
    let valid = hex(&encode(&flood_msg(1, 2, 3, b"payload!")));
    let alphabet = b"0123456789abcdefABCDEF0101 \t\n\r\nxg-";
    for i in 0..300 {
        let input: Vec<u8> = if i % 3 == 0 {
            // A valid line, mutated at a few places.
            let mut v = valid.clone().into_bytes();
            for _ in 0..1 + rng.below(3) {
                let at = rng.below(v.len() as u64) as usize;
                v[at] = alphabet[rng.below(alphabet.len() as u64) as usize];
            }
            v.truncate(rng.below(v.len() as u64 + 1) as usize);
            v
        } else {
            let len = rng.below(120) as usize;
            let mut v: Vec<u8> = (0..len)
                .map(|_| alphabet[rng.below(alphabet.len() as u64) as usize])
                .collect();
            if i % 3 == 1 && v.len() >= 4 {
                v[..4].copy_from_slice(b"0101");
            }
            v
        };
        check_random(
            &["--hex"],
            &input,
            &format!("hex case {i}: {:?}", text(&input)),
        );
    }
}
