//! The handshake over an async stream: [`dial`] and [`accept`] run the pure [`Dialer`] and
//! [`Acceptor`] steps over a tokio socket, [`finish`] writes the acceptor's verdict.

use std::io;
use std::net::IpAddr;

use lifeline_core::tree::Rank;
use lifeline_core::Class;
use lifeline_transport_common::AddressBook;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::{
    check_version, decode_verdict, same_ip, Acceptor, Dialer, HandshakeError, Hello, Listen,
    PastBook, Verdict, CHALLENGE_LEN, HELLO_LEN,
};
use crate::key::ClusterKey;

/// A fresh nonce from the OS.
pub(crate) fn nonce() -> io::Result<[u8; 32]> {
    let mut n = [0u8; 32];
    getrandom::fill(&mut n).map_err(|e| io::Error::other(e.to_string()))?;
    Ok(n)
}

/// The dialer's side: proves the key as `me` to `to` on a connection of `class`, and checks
/// that the acceptor is `to` and holds the key. `Ok` means the acceptor installed the
/// connection; [`HandshakeError::Duplicate`] means its own connection wins.
pub async fn dial<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
    key: &ClusterKey,
    me: Rank,
    to: Rank,
    class: Class,
) -> Result<(), HandshakeError> {
    dial_announcing(s, key, me, to, class, Listen::default()).await
}

/// [`dial`], announcing `listen` (this rank's span and listening port) in the HELLO, so an
/// acceptor whose address book lacks `me` can learn it (see [the handshake](super)).
pub async fn dial_announcing<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
    key: &ClusterKey,
    me: Rank,
    to: Rank,
    class: Class,
    listen: Listen,
) -> Result<(), HandshakeError> {
    let d = Dialer::announcing(key, me, to, class, listen, nonce()?);
    s.write_all(d.hello()).await?;
    s.flush().await?;
    let mut ch = [0u8; CHALLENGE_LEN];
    s.read_exact(&mut ch).await?;
    let proof = d.on_challenge(&ch)?;
    s.write_all(&proof).await?;
    s.flush().await?;
    let mut result = [0u8; super::RESULT_MAX_LEN];
    s.read_exact(&mut result[..1]).await?;
    if result[0] == 3 {
        s.read_exact(&mut result[1..]).await?;
    }
    match decode_verdict(&result) {
        Some((Verdict::Accept, _)) => Ok(()),
        Some((Verdict::Duplicate, _)) => Err(HandshakeError::Duplicate),
        Some((Verdict::Removed { epoch }, _)) => Err(HandshakeError::Removed { epoch }),
        Some((Verdict::Refuse, _)) | None => Err(HandshakeError::Refused),
    }
}

/// The acceptor's side, up to (not including) the RESULT byte: checks the dialer's claim
/// against the address book and `peer_ip` (or, for a rank past the book, against `past`),
/// and its proof of the key. The caller decides the [`Verdict`] and writes it with [`finish`];
/// a dialer absent from `book` that passed is to be learned at [`Hello::listen_addr`].
pub async fn accept<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
    key: &ClusterKey,
    me: Rank,
    book: &AddressBook,
    past: PastBook,
    peer_ip: IpAddr,
) -> Result<Hello, HandshakeError> {
    let mut magic = [0u8; 4];
    s.read_exact(&mut magic).await?;
    accept_after_magic(s, magic, key, me, book, past, peer_ip).await
}

/// [`accept`] once the listener has read the connection's first four bytes, `magic` (to tell
/// a rank's HELLO from a [join preamble](super::join)). The version byte is read and checked
/// before the rest: another version is refused at once ([`HandshakeError::Version`]).
pub async fn accept_after_magic<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
    magic: [u8; 4],
    key: &ClusterKey,
    me: Rank,
    book: &AddressBook,
    past: PastBook,
    peer_ip: IpAddr,
) -> Result<Hello, HandshakeError> {
    let mut raw = [0u8; HELLO_LEN];
    raw[..4].copy_from_slice(&magic);
    if magic != super::MAGIC {
        return Err(HandshakeError::Garbage);
    }
    s.read_exact(&mut raw[4..5]).await?;
    check_version(raw[4])?;
    s.read_exact(&mut raw[5..]).await?;
    let from_ok = |h: &Hello| {
        let Some(addr) = book.get(h.from) else {
            return past.check(h);
        };
        if !same_ip(addr.ip(), peer_ip) {
            return Err(HandshakeError::AddressMismatch {
                rank: h.from,
                expected: addr.ip(),
                got: peer_ip,
            });
        }
        Ok(())
    };
    let (acc, ch) = Acceptor::on_hello(key, me, &raw, nonce()?, from_ok)?;
    s.write_all(&ch).await?;
    s.flush().await?;
    let mut proof = [0u8; 32];
    s.read_exact(&mut proof).await?;
    acc.on_proof(&proof)
}

/// Writes the acceptor's verdict.
pub async fn finish<S: AsyncWrite + Unpin>(s: &mut S, v: Verdict) -> io::Result<()> {
    let (b, n) = v.encode();
    s.write_all(&b[..n]).await?;
    s.flush().await
}
