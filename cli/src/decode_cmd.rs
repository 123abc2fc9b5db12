//! `lifeline decode`: wire frames from stdin, one JSON line per frame on stdout.
//!
//! Binary mode reads a stream of concatenated frames and splits it the way a stream transport
//! does, with [`wire::frame_len`]: the 6-byte header is read and checked (version, kind, length
//! against `--max-frame`) before the body is read. `--hex` reads one frame per line as hex
//! digits. The first malformed frame stops the run with an error naming its index and byte
//! offset (exit 2); the frames before it have been printed. Untrusted input never panics: every
//! check is [`Message::decode`]'s or [`wire::frame_len`]'s typed error.

use std::fmt::Write as _;
use std::io::{self, BufRead, Read, Write};

use bytes::Bytes;
use clap::Args;
use lifeline_core::wire::{self, DecodeError, Limits, MembershipMsg, Message, HEADER_LEN};
use lifeline_core::MAX_FRAME;

use crate::{try_write_stdout, CliError};

/// Arguments of `lifeline decode`.
#[derive(Debug, Args)]
pub(crate) struct DecodeArgs {
    /// Read one frame per line as hex digits (whitespace ignored, empty lines skipped) instead
    /// of a binary stream of concatenated frames.
    #[arg(long)]
    hex: bool,
    /// Largest frame accepted, header included (6..=268435456).
    #[arg(long, value_name = "BYTES", default_value_t = u64::from(Limits::default().max_frame))]
    max_frame: u64,
}

/// Runs `lifeline decode`.
pub(crate) fn run(args: &DecodeArgs) -> Result<(), CliError> {
    let max_frame = u32::try_from(args.max_frame)
        .ok()
        .filter(|m| (HEADER_LEN as u32..=MAX_FRAME).contains(m))
        .ok_or_else(|| {
            CliError::Usage(format!(
                "--max-frame {} is out of range ({HEADER_LEN}..={MAX_FRAME})",
                args.max_frame
            ))
        })?;
    let limits = Limits {
        max_frame,
        ..Limits::default()
    };
    let mut input = io::stdin().lock();
    try_write_stdout(|out| {
        if args.hex {
            hex_frames(&mut input, &limits, out)
        } else {
            binary_frames(&mut input, &limits, out)
        }
    })
}

/// Decodes a binary stream of concatenated frames.
fn binary_frames(
    input: &mut impl BufRead,
    limits: &Limits,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let mut offset: u64 = 0;
    for index in 0u64.. {
        let bad = |what: String| {
            CliError::Usage(format!("frame {index} at byte offset {offset}: {what}"))
        };
        let mut head = [0u8; HEADER_LEN];
        let got = read_full(input, &mut head).map_err(|e| read_error(offset, &e))?;
        if got == 0 {
            break;
        }
        if got < HEADER_LEN {
            return Err(bad(format!(
                "the stream ends inside the frame header ({got} of {HEADER_LEN} bytes)"
            )));
        }
        let total = match wire::frame_len(&head, limits) {
            Ok(Some(total)) => total,
            Ok(None) => return Err(bad("incomplete frame header".into())),
            Err(e) => return Err(bad(e.to_string())),
        };
        let body = (total - HEADER_LEN) as u64;
        // Grows as bytes arrive: a header announcing a large body costs nothing until it comes.
        let mut frame = head.to_vec();
        let got = input
            .by_ref()
            .take(body)
            .read_to_end(&mut frame)
            .map_err(|e| read_error(offset + HEADER_LEN as u64, &e))? as u64;
        if got < body {
            return Err(bad(format!(
                "the stream ends inside the frame body ({got} of {body} bytes)"
            )));
        }
        let msg = Message::decode(Bytes::from(frame), limits).map_err(|e| bad(e.to_string()))?;
        writeln!(out, "{}", json(&msg)).map_err(CliError::Io)?;
        offset += total as u64;
    }
    Ok(())
}

/// Reads until `buf` is full or the input ends; returns the bytes read.
fn read_full(input: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match input.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

fn read_error(offset: u64, e: &io::Error) -> CliError {
    CliError::Usage(format!("reading stdin at byte offset {offset}: {e}"))
}

/// One frame being assembled from a hex line.
struct HexLine {
    /// 1-based line number.
    line: u64,
    /// Input offset of the line's first byte.
    start: u64,
    bytes: Vec<u8>,
    /// The high nibble of a byte whose low nibble has not come yet.
    high: Option<u8>,
}

/// Decodes one frame per line of hex digits. The input is scanned byte by byte (it need not be
/// UTF-8), and a line is refused as soon as it holds more than `max_frame` bytes, so a huge line
/// never makes a huge buffer.
fn hex_frames(
    input: &mut impl BufRead,
    limits: &Limits,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let mut index: u64 = 0;
    let mut offset: u64 = 0;
    let mut cur = HexLine {
        line: 1,
        start: 0,
        bytes: Vec::new(),
        high: None,
    };
    loop {
        let buf = match input.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(read_error(offset, &e)),
        };
        if buf.is_empty() {
            break;
        }
        let n = buf.len();
        for (i, &b) in buf.iter().enumerate() {
            let pos = offset + i as u64;
            let bad = |cur: &HexLine, what: String| {
                CliError::Usage(format!(
                    "frame {index} (line {}) at byte offset {pos}: {what}",
                    cur.line
                ))
            };
            if b == b'\n' {
                if finish_line(&mut cur, index, limits, out)? {
                    index += 1;
                }
                cur.line += 1;
                cur.start = pos + 1;
                continue;
            }
            if b.is_ascii_whitespace() {
                continue;
            }
            let Some(nibble) = hex_value(b) else {
                let what = if b.is_ascii_graphic() {
                    format!("invalid hex digit {:?}", b as char)
                } else {
                    format!("invalid byte 0x{b:02x} (expected a hex digit)")
                };
                return Err(bad(&cur, what));
            };
            match cur.high.take() {
                None => cur.high = Some(nibble),
                Some(high) => {
                    if cur.bytes.len() >= limits.max_frame as usize {
                        let what = match wire::frame_len(&cur.bytes, limits) {
                            Err(e) => e.to_string(),
                            Ok(_) => format!(
                                "the line holds more than --max-frame {} bytes",
                                limits.max_frame
                            ),
                        };
                        return Err(bad(&cur, what));
                    }
                    cur.bytes.push(high << 4 | nibble);
                }
            }
        }
        input.consume(n);
        offset += n as u64;
    }
    finish_line(&mut cur, index, limits, out)?;
    Ok(())
}

/// Decodes and prints the frame of a finished line; `Ok(false)` for a line without digits.
fn finish_line(
    cur: &mut HexLine,
    index: u64,
    limits: &Limits,
    out: &mut dyn Write,
) -> Result<bool, CliError> {
    let bad = |what: String| {
        CliError::Usage(format!(
            "frame {index} (line {}) at byte offset {}: {what}",
            cur.line, cur.start
        ))
    };
    if cur.high.is_some() {
        return Err(bad("odd number of hex digits".into()));
    }
    if cur.bytes.is_empty() {
        return Ok(false);
    }
    let frame = Bytes::from(std::mem::take(&mut cur.bytes));
    let msg = Message::decode(frame, limits).map_err(|e| {
        bad(match e {
            // One line holds exactly one frame: say which way it is off.
            DecodeError::LengthMismatch { said, have } if have > said as usize => format!(
                "{} bytes after the end of the frame (its header says {said} body bytes)",
                have - said as usize
            ),
            DecodeError::LengthMismatch { said, have } => {
                format!("the line ends inside the frame body ({have} of {said} bytes)")
            }
            e => e.to_string(),
        })
    })?;
    writeln!(out, "{}", json(&msg)).map_err(CliError::Io)?;
    Ok(true)
}

fn hex_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// One JSON object per frame, keys in a fixed order.
fn json(msg: &Message) -> String {
    match msg {
        Message::Flood(m) => format!(
            r#"{{"kind":"flood","origin":{},"id":{},"hops":{},"payload_len":{},"payload_hex":"{}"}}"#,
            m.origin,
            m.id,
            m.hops,
            m.payload.len(),
            hex(&m.payload)
        ),
        Message::Revoke(m) => format!(
            r#"{{"kind":"revoke","group":{},"epoch":{},"origin":{},"hops":{}}}"#,
            m.group, m.epoch, m.origin, m.hops
        ),
        // A frame relayed around a gray link: the envelope, and the inner frame's kind by its
        // kind byte (an empty inner frame is a probe).
        Message::Membership(MembershipMsg::Relayed(m)) => {
            let inner = match m.frame.get(1) {
                None => "probe",
                Some(&b) => wire::Kind::from_u8(b).map_or("unknown", |k| k.name()),
            };
            format!(
                r#"{{"kind":"relayed","src":{},"dst":{},"flags":{},"inner_kind":"{}","inner_len":{}}}"#,
                m.src,
                m.dst,
                m.flags,
                inner,
                m.frame.len()
            )
        }
        // A kind this printer does not know yet: its name and size.
        other => format!(
            r#"{{"kind":"{}","frame_len":{}}}"#,
            other.kind().name(),
            other.frame_len()
        ),
    }
}

fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(2 * bytes.len());
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}
