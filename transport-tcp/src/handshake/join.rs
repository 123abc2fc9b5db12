//! The join preamble: how a process that is not a member yet (it has no rank, so it cannot
//! run the rank [HELLO](super)) proves the cluster key to a member's listener, sends its
//! join request, and checks that the answer comes from a holder of the key. Sans-IO, like
//! the rank handshake: [`JoinDialer`] is the joiner's side, [`JoinAcceptor`] the contact's.
//!
//! ```text
//! joiner → contact   JOIN_HELLO  "LLJT" version:u8 nonce_j[32]                            (37 B)
//! contact → joiner   CHALLENGE   "LLJT" nonce_c[32] mac_c[32]                             (68 B)
//! joiner → contact   PROOF       mac_j[32] len:u32, then the JoinRequest (len bytes)
//! contact → joiner   ANSWER      len:u32 answer[len] mac_r[32], then the contact closes
//!
//! mac_c = BLAKE3-keyed(key, "jcontact" | JOIN_HELLO | nonce_c)
//! mac_j = BLAKE3-keyed(key, "joiner.." | JOIN_HELLO | nonce_c | len | request)
//! mac_r = BLAKE3-keyed(key, "janswer." | JOIN_HELLO | nonce_c | len | answer)
//! ```
//!
//! The first four bytes tell a join connection from a rank connection (`"LLT1"`) on the same
//! listener. As in the rank handshake, each side's MAC covers the other side's fresh nonce
//! (no replay), the role labels keep one side's MAC from being reflected as another's, and the
//! joiner checks `mac_c` before it sends anything keyed, so a stranger posing as a contact
//! learns no MAC of the joiner's. Unlike the frames of a rank connection, the request (with
//! the address members will dial) and the answer (the admission and the address book) are
//! covered by the MACs: an on-path attacker cannot change them. The request is bounded by
//! [`MAX_JOIN_REQUEST`] before any room is made for it.

use lifeline_core::join::MAX_ADDR_LEN;

use super::HandshakeError;
use crate::key::ClusterKey;

/// Join preamble magic: "Lifeline Join over TCP".
pub const JOIN_MAGIC: [u8; 4] = *b"LLJT";
/// Join preamble version.
pub const JOIN_VERSION: u8 = 1;
/// Length of JOIN_HELLO.
pub const JOIN_HELLO_LEN: usize = 37;
/// Length of the contact's CHALLENGE.
pub const JOIN_CHALLENGE_LEN: usize = 68;
/// Length of the joiner's PROOF (its MAC and the request's length).
pub const JOIN_PROOF_LEN: usize = 36;
/// Longest join request: the core's [`JoinRequest`](lifeline_core::join::JoinRequest) (magic,
/// kind, join id, address length) with an address of [`MAX_ADDR_LEN`] bytes; far below the
/// core's [`MAX_JOIN_MSG`](lifeline_core::join::MAX_JOIN_MSG).
pub const MAX_JOIN_REQUEST: usize = 4 + 1 + 12 + 4 + MAX_ADDR_LEN as usize;

const LABEL_CONTACT: &[u8; 8] = b"jcontact";
const LABEL_JOINER: &[u8; 8] = b"joiner..";
const LABEL_ANSWER: &[u8; 8] = b"janswer.";

fn keyed(key: &ClusterKey, label: &[u8; 8], parts: &[&[u8]]) -> blake3::Hash {
    let mut h = blake3::Hasher::new_keyed(&key.0);
    h.update(label);
    for p in parts {
        h.update(p);
    }
    h.finalize()
}

/// The joiner's side of one join preamble: send [`JoinDialer::hello`], answer the CHALLENGE
/// with [`JoinDialer::on_challenge`] (the PROOF, then the request), then check the answer with
/// [`JoinDialer::check_answer`]. The nonce must be fresh (random).
#[derive(Clone, Debug)]
pub struct JoinDialer {
    key: ClusterKey,
    hello: [u8; JOIN_HELLO_LEN],
    nonce_c: Option<[u8; 32]>,
}

impl JoinDialer {
    /// A preamble proving `key`.
    pub fn new(key: &ClusterKey, nonce: [u8; 32]) -> Self {
        let mut hello = [0u8; JOIN_HELLO_LEN];
        hello[..4].copy_from_slice(&JOIN_MAGIC);
        hello[4] = JOIN_VERSION;
        hello[5..].copy_from_slice(&nonce);
        Self {
            key: key.clone(),
            hello,
            nonce_c: None,
        }
    }

    /// The JOIN_HELLO to send first.
    pub fn hello(&self) -> &[u8; JOIN_HELLO_LEN] {
        &self.hello
    }

    /// Checks the contact's CHALLENGE (it must prove the key) and returns the PROOF to send,
    /// followed by `request` itself. On an error nothing may be sent: close the connection. A
    /// request over [`MAX_JOIN_REQUEST`] is refused ([`HandshakeError::TooLong`]).
    pub fn on_challenge(
        &mut self,
        ch: &[u8; JOIN_CHALLENGE_LEN],
        request: &[u8],
    ) -> Result<[u8; JOIN_PROOF_LEN], HandshakeError> {
        if ch[..4] != JOIN_MAGIC {
            return Err(HandshakeError::Garbage);
        }
        if request.len() > MAX_JOIN_REQUEST {
            return Err(HandshakeError::TooLong(request.len()));
        }
        let mut nonce_c = [0u8; 32];
        nonce_c.copy_from_slice(&ch[4..36]);
        let mut mac_c = [0u8; 32];
        mac_c.copy_from_slice(&ch[36..68]);
        // `blake3::Hash` equality is constant-time.
        if blake3::Hash::from_bytes(mac_c)
            != keyed(&self.key, LABEL_CONTACT, &[&self.hello, &nonce_c])
        {
            return Err(HandshakeError::BadMac);
        }
        self.nonce_c = Some(nonce_c);
        let len = (request.len() as u32).to_be_bytes();
        let mac_j = keyed(
            &self.key,
            LABEL_JOINER,
            &[&self.hello, &nonce_c, &len, request],
        );
        let mut proof = [0u8; JOIN_PROOF_LEN];
        proof[..32].copy_from_slice(mac_j.as_bytes());
        proof[32..].copy_from_slice(&len);
        Ok(proof)
    }

    /// Checks the MAC of the contact's answer (after [`Self::on_challenge`]).
    pub fn check_answer(&self, answer: &[u8], mac: &[u8; 32]) -> Result<(), HandshakeError> {
        let Some(nonce_c) = self.nonce_c else {
            return Err(HandshakeError::Garbage);
        };
        let len = (answer.len() as u32).to_be_bytes();
        let want = keyed(
            &self.key,
            LABEL_ANSWER,
            &[&self.hello, &nonce_c, &len, answer],
        );
        if blake3::Hash::from_bytes(*mac) != want {
            return Err(HandshakeError::BadMac);
        }
        Ok(())
    }
}

/// The contact's side of one join preamble: [`JoinAcceptor::on_hello`] checks the
/// JOIN_HELLO and gives the CHALLENGE; [`JoinAcceptor::request_len`] reads the PROOF's length
/// (bounded); [`JoinAcceptor::on_request`] checks the PROOF over the request;
/// [`JoinAcceptor::answer_mac`] keys the answer.
#[derive(Clone, Debug)]
pub struct JoinAcceptor {
    key: ClusterKey,
    hello: [u8; JOIN_HELLO_LEN],
    nonce_c: [u8; 32],
}

impl JoinAcceptor {
    /// Checks a JOIN_HELLO (magic and version); `nonce_c` must be fresh (random). Returns the
    /// state for the PROOF and the CHALLENGE to send.
    pub fn on_hello(
        key: &ClusterKey,
        raw: &[u8; JOIN_HELLO_LEN],
        nonce_c: [u8; 32],
    ) -> Result<(Self, [u8; JOIN_CHALLENGE_LEN]), HandshakeError> {
        if raw[..4] != JOIN_MAGIC || raw[4] != JOIN_VERSION {
            return Err(HandshakeError::Garbage);
        }
        let mut ch = [0u8; JOIN_CHALLENGE_LEN];
        ch[..4].copy_from_slice(&JOIN_MAGIC);
        ch[4..36].copy_from_slice(&nonce_c);
        ch[36..].copy_from_slice(keyed(key, LABEL_CONTACT, &[raw, &nonce_c]).as_bytes());
        let state = Self {
            key: key.clone(),
            hello: *raw,
            nonce_c,
        };
        Ok((state, ch))
    }

    /// The request's length from the PROOF, refused past [`MAX_JOIN_REQUEST`] (before any room
    /// is made for the request).
    pub fn request_len(proof: &[u8; JOIN_PROOF_LEN]) -> Result<usize, HandshakeError> {
        let len = u32::from_be_bytes([proof[32], proof[33], proof[34], proof[35]]) as usize;
        if len > MAX_JOIN_REQUEST {
            return Err(HandshakeError::TooLong(len));
        }
        Ok(len)
    }

    /// Checks the joiner's PROOF of the key over `request`; on success the request is the
    /// joiner's, unchanged.
    pub fn on_request(
        &self,
        proof: &[u8; JOIN_PROOF_LEN],
        request: &[u8],
    ) -> Result<(), HandshakeError> {
        let len = Self::request_len(proof)?;
        if len != request.len() {
            return Err(HandshakeError::Garbage);
        }
        let mut mac_j = [0u8; 32];
        mac_j.copy_from_slice(&proof[..32]);
        let want = keyed(
            &self.key,
            LABEL_JOINER,
            &[&self.hello, &self.nonce_c, &proof[32..], request],
        );
        if blake3::Hash::from_bytes(mac_j) != want {
            return Err(HandshakeError::BadMac);
        }
        Ok(())
    }

    /// The MAC that follows `answer` on the wire.
    pub fn answer_mac(&self, answer: &[u8]) -> [u8; 32] {
        let len = (answer.len() as u32).to_be_bytes();
        *keyed(
            &self.key,
            LABEL_ANSWER,
            &[&self.hello, &self.nonce_c, &len, answer],
        )
        .as_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(s: &[u8]) -> ClusterKey {
        ClusterKey::from_secret(s).unwrap()
    }

    /// Runs the steps with the joiner holding `jk` and the contact `ck`.
    fn run(jk: &[u8], ck: &[u8], request: &[u8]) -> Result<(), HandshakeError> {
        let mut d = JoinDialer::new(&key(jk), [7; 32]);
        let (acc, ch) = JoinAcceptor::on_hello(&key(ck), d.hello(), [9; 32])?;
        let proof = d.on_challenge(&ch, request)?;
        assert_eq!(JoinAcceptor::request_len(&proof)?, request.len());
        acc.on_request(&proof, request)?;
        let answer = b"admitted";
        d.check_answer(answer, &acc.answer_mac(answer))
    }

    #[test]
    fn both_sides_prove_the_key_and_cover_request_and_answer() {
        assert!(run(b"k", b"k", b"LLJ1 request").is_ok());
        assert!(matches!(
            run(b"k", b"other", b"r"),
            Err(HandshakeError::BadMac)
        ));
        let k = key(b"k");
        let mut d = JoinDialer::new(&k, [1; 32]);
        let (acc, ch) = JoinAcceptor::on_hello(&k, d.hello(), [2; 32]).unwrap();
        let proof = d.on_challenge(&ch, b"request").unwrap();
        // A changed request, a changed answer, a replayed proof against a fresh nonce.
        assert!(matches!(
            acc.on_request(&proof, b"requesT"),
            Err(HandshakeError::BadMac)
        ));
        assert!(matches!(
            d.check_answer(b"y", &acc.answer_mac(b"x")),
            Err(HandshakeError::BadMac)
        ));
        let (acc2, _) = JoinAcceptor::on_hello(&k, d.hello(), [3; 32]).unwrap();
        assert!(matches!(
            acc2.on_request(&proof, b"request"),
            Err(HandshakeError::BadMac)
        ));
    }

    #[test]
    fn garbage_and_oversized_requests_are_refused() {
        let k = key(b"k");
        assert!(matches!(
            JoinAcceptor::on_hello(&k, &[0x55; JOIN_HELLO_LEN], [0; 32]),
            Err(HandshakeError::Garbage)
        ));
        let mut d = JoinDialer::new(&k, [1; 32]);
        let (_, mut ch) = JoinAcceptor::on_hello(&k, d.hello(), [2; 32]).unwrap();
        let big = vec![0u8; MAX_JOIN_REQUEST + 1];
        assert!(matches!(
            d.on_challenge(&ch, &big),
            Err(HandshakeError::TooLong(_))
        ));
        let mut proof = [0u8; JOIN_PROOF_LEN];
        proof[32..].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(matches!(
            JoinAcceptor::request_len(&proof),
            Err(HandshakeError::TooLong(_))
        ));
        ch[0] = b'X';
        assert!(matches!(
            d.on_challenge(&ch, b"r"),
            Err(HandshakeError::Garbage)
        ));
        assert!(d.check_answer(b"x", &[0; 32]).is_err(), "no challenge yet");
    }
}
