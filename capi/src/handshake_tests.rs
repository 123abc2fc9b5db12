//! Unit tests of `handshake.rs`.

use super::*;
use std::ptr::{null, null_mut};

fn key(s: &[u8]) -> *mut TcpKey {
    let mut k = null_mut();
    // SAFETY: a live slice and a writable out-pointer.
    let r = unsafe { lifeline_tcp_key_new(s.as_ptr(), s.len(), &mut k) };
    assert_eq!(r, LIFELINE_OK);
    k
}

/// Runs dialer (key `dk`) against acceptor (key `ak`) through the C functions; the result
/// of the acceptor's PROOF check.
fn round_trip(dk: &[u8], ak: &[u8]) -> LifelineResult {
    let (kd, ka) = (key(dk), key(ak));
    let mut hello = [0u8; LIFELINE_TCP_HELLO_LEN];
    let mut d = null_mut();
    // SAFETY: every pointer is live with the documented sizes.
    unsafe {
        assert_eq!(
            lifeline_tcp_dialer_new(
                kd,
                3,
                1,
                LIFELINE_CLASS_DATA,
                [7; 32].as_ptr(),
                hello.as_mut_ptr(),
                &mut d
            ),
            LIFELINE_OK
        );
        let mut ch = [0u8; LIFELINE_TCP_CHALLENGE_LEN];
        let (mut from, mut class, mut a) = (0u32, 9u32, null_mut());
        let r = lifeline_tcp_acceptor_on_hello(
            ka,
            1,
            hello.as_ptr(),
            hello.len(),
            [9; 32].as_ptr(),
            ch.as_mut_ptr(),
            &mut from,
            &mut class,
            &mut a,
        );
        assert_eq!(r, LIFELINE_OK);
        assert_eq!((from, class), (3, LIFELINE_CLASS_DATA));
        let mut proof = [0u8; 32];
        let r = lifeline_tcp_dialer_on_challenge(d, ch.as_ptr(), ch.len(), proof.as_mut_ptr());
        let out = if r == LIFELINE_OK {
            lifeline_tcp_acceptor_on_proof(a, proof.as_ptr(), proof.len())
        } else {
            r
        };
        lifeline_tcp_dialer_free(d);
        lifeline_tcp_acceptor_free(a);
        lifeline_tcp_key_free(kd);
        lifeline_tcp_key_free(ka);
        out
    }
}

#[test]
fn dialer_and_acceptor_prove_the_key_through_the_c_functions() {
    assert_eq!(round_trip(b"secret", b"secret"), LIFELINE_OK);
    // The dialer sees the acceptor's bad MAC first, and sends nothing.
    assert_eq!(round_trip(b"secret", b"other"), LIFELINE_ERR_BAD_MAC);
}

#[test]
fn a_bad_proof_is_refused() {
    let k = key(b"k");
    let mut hello = [0u8; LIFELINE_TCP_HELLO_LEN];
    let (mut d, mut a) = (null_mut(), null_mut());
    let mut ch = [0u8; LIFELINE_TCP_CHALLENGE_LEN];
    let (mut from, mut class) = (0, 0);
    // SAFETY: every pointer is live with the documented sizes.
    unsafe {
        lifeline_tcp_dialer_new(
            k,
            0,
            1,
            LIFELINE_CLASS_CONTROL,
            [1; 32].as_ptr(),
            hello.as_mut_ptr(),
            &mut d,
        );
        lifeline_tcp_acceptor_on_hello(
            k,
            1,
            hello.as_ptr(),
            LIFELINE_TCP_HELLO_LEN,
            [2; 32].as_ptr(),
            ch.as_mut_ptr(),
            &mut from,
            &mut class,
            &mut a,
        );
        assert_eq!((from, class), (0, LIFELINE_CLASS_CONTROL));
        assert_eq!(
            lifeline_tcp_acceptor_on_proof(a, [0u8; 32].as_ptr(), 32),
            LIFELINE_ERR_BAD_MAC
        );
        assert_eq!(
            lifeline_tcp_acceptor_on_proof(a, [0u8; 32].as_ptr(), 31),
            LIFELINE_ERR_INVALID_ARGUMENT
        );
        assert_eq!(
            lifeline_tcp_acceptor_on_proof(a, null(), 32),
            LIFELINE_ERR_NULL
        );
        // A tampered challenge fails the dialer's check.
        let mut proof = [0u8; 32];
        ch[50] ^= 1;
        assert_eq!(
            lifeline_tcp_dialer_on_challenge(d, ch.as_ptr(), 72, proof.as_mut_ptr()),
            LIFELINE_ERR_BAD_MAC
        );
        ch[0] = b'X';
        assert_eq!(
            lifeline_tcp_dialer_on_challenge(d, ch.as_ptr(), 72, proof.as_mut_ptr()),
            LIFELINE_ERR_HANDSHAKE
        );
        lifeline_tcp_dialer_free(d);
        lifeline_tcp_acceptor_free(a);
        lifeline_tcp_key_free(k);
    }
}

#[test]
fn garbage_and_misaddressed_hellos_are_refused() {
    let k = key(b"k");
    let mut ch = [0u8; LIFELINE_TCP_CHALLENGE_LEN];
    let (mut from, mut class, mut a) = (0, 0, null_mut());
    let mut hello = [0x55u8; LIFELINE_TCP_HELLO_LEN];
    // SAFETY: every pointer is live with the documented sizes (or NULL on purpose).
    unsafe {
        let r = lifeline_tcp_acceptor_on_hello(
            k,
            1,
            hello.as_ptr(),
            LIFELINE_TCP_HELLO_LEN,
            [2; 32].as_ptr(),
            ch.as_mut_ptr(),
            &mut from,
            &mut class,
            &mut a,
        );
        assert_eq!((r, a), (LIFELINE_ERR_HANDSHAKE, null_mut()));
        let r = lifeline_tcp_acceptor_on_hello(
            k,
            1,
            hello.as_ptr(),
            LIFELINE_TCP_HELLO_LEN - 1,
            [2; 32].as_ptr(),
            ch.as_mut_ptr(),
            &mut from,
            &mut class,
            &mut a,
        );
        assert_eq!(r, LIFELINE_ERR_INVALID_ARGUMENT);
        let mut d = null_mut();
        lifeline_tcp_dialer_new(k, 0, 2, 0, [1; 32].as_ptr(), hello.as_mut_ptr(), &mut d);
        lifeline_tcp_dialer_free(d);
        // Addressed to rank 2, received by rank 1.
        let r = lifeline_tcp_acceptor_on_hello(
            k,
            1,
            hello.as_ptr(),
            LIFELINE_TCP_HELLO_LEN,
            [2; 32].as_ptr(),
            ch.as_mut_ptr(),
            &mut from,
            &mut class,
            &mut a,
        );
        assert_eq!(r, LIFELINE_ERR_HANDSHAKE);
        // Unknown class, empty secret, NULLs.
        assert_eq!(
            lifeline_tcp_dialer_new(k, 0, 2, 7, [1; 32].as_ptr(), hello.as_mut_ptr(), &mut d),
            LIFELINE_ERR_INVALID_ARGUMENT
        );
        let mut k2 = null_mut();
        assert_eq!(
            lifeline_tcp_key_new(b"x".as_ptr(), 0, &mut k2),
            LIFELINE_ERR_INVALID_ARGUMENT
        );
        assert_eq!(lifeline_tcp_key_new(null(), 0, &mut k2), LIFELINE_ERR_NULL);
        assert_eq!(
            lifeline_tcp_dialer_new(
                null(),
                0,
                2,
                0,
                [1; 32].as_ptr(),
                hello.as_mut_ptr(),
                &mut d
            ),
            LIFELINE_ERR_NULL
        );
        assert_eq!(
            lifeline_tcp_dialer_on_challenge(null(), ch.as_ptr(), 72, hello.as_mut_ptr()),
            LIFELINE_ERR_NULL
        );
        lifeline_tcp_key_free(k);
    }
}

#[test]
fn verdicts_round_trip_and_wait_for_their_bytes() {
    let (mut v, mut e, mut n) = (99u32, 99u64, 99usize);
    let mut buf = [0u8; LIFELINE_TCP_RESULT_MAX_LEN];
    let mut len = 0;
    // SAFETY: every pointer is live with the documented sizes.
    unsafe {
        for (verdict, epoch) in [(0, 0), (1, 0), (2, 0), (3, 0x0102_0304_0506_0708)] {
            assert_eq!(
                lifeline_tcp_verdict_encode(verdict, epoch, buf.as_mut_ptr(), &mut len),
                LIFELINE_OK
            );
            assert_eq!(
                lifeline_tcp_decode_verdict(buf.as_ptr(), len - 1, &mut v, &mut e, &mut n),
                LIFELINE_DONE
            );
            assert_eq!(
                lifeline_tcp_decode_verdict(buf.as_ptr(), len, &mut v, &mut e, &mut n),
                LIFELINE_OK
            );
            assert_eq!((v, e, n), (verdict, epoch, len));
        }
        // Partial "removed": 5 of 9 bytes.
        let (b, _) = Verdict::Removed { epoch: 5 }.encode();
        assert_eq!(
            lifeline_tcp_decode_verdict(b.as_ptr(), 5, &mut v, &mut e, &mut n),
            LIFELINE_DONE
        );
        // Frames after an accept are not consumed.
        assert_eq!(
            lifeline_tcp_decode_verdict([0u8, 1, 2, 3].as_ptr(), 4, &mut v, &mut e, &mut n),
            LIFELINE_OK
        );
        assert_eq!((v, n), (LIFELINE_VERDICT_ACCEPT, 1));
        assert_eq!(
            lifeline_tcp_decode_verdict([200u8].as_ptr(), 1, &mut v, &mut e, &mut n),
            LIFELINE_OK
        );
        assert_eq!(v, LIFELINE_VERDICT_REFUSE);
        assert_eq!(
            lifeline_tcp_verdict_encode(4, 0, buf.as_mut_ptr(), &mut len),
            LIFELINE_ERR_INVALID_ARGUMENT
        );
        assert_eq!(
            lifeline_tcp_decode_verdict(null(), 1, &mut v, &mut e, &mut n),
            LIFELINE_ERR_NULL
        );
    }
    assert_eq!(LIFELINE_TCP_HELLO_LEN, HELLO_LEN);
    assert_eq!(LIFELINE_TCP_CHALLENGE_LEN, CHALLENGE_LEN);
    assert_eq!(LIFELINE_TCP_RESULT_MAX_LEN, RESULT_MAX_LEN);
}

/// Version 2: an announcing dialer's span and port reach the acceptor through
/// `lifeline_tcp_acceptor_listen`; a plain dialer announces nothing; a version-1 HELLO is
/// refused as a handshake error, nothing made.
#[test]
fn the_hello_announces_span_and_port_and_an_old_version_is_refused() {
    let k = key(b"secret");
    // SAFETY: every pointer is live with the documented sizes.
    unsafe {
        for (announce, want) in [(true, (7u32, 7001u16)), (false, (0, 0))] {
            let mut hello = [0u8; LIFELINE_TCP_HELLO_LEN];
            let mut d = null_mut();
            let r = if announce {
                lifeline_tcp_dialer_new_announcing(
                    k,
                    6,
                    4,
                    LIFELINE_CLASS_CONTROL,
                    7,
                    7001,
                    [1; 32].as_ptr(),
                    hello.as_mut_ptr(),
                    &mut d,
                )
            } else {
                lifeline_tcp_dialer_new(
                    k,
                    6,
                    4,
                    LIFELINE_CLASS_CONTROL,
                    [1; 32].as_ptr(),
                    hello.as_mut_ptr(),
                    &mut d,
                )
            };
            assert_eq!(r, LIFELINE_OK);
            // The acceptor's side of the first `len` bytes of `hello`: the result and the rank
            // it names.
            let on_hello = |hello: &[u8], len: usize, a: &mut *mut _| {
                let mut ch = [0u8; LIFELINE_TCP_CHALLENGE_LEN];
                let (mut from, mut class) = (0u32, 0u32);
                let r = lifeline_tcp_acceptor_on_hello(
                    k,
                    4,
                    hello.as_ptr(),
                    len,
                    [2; 32].as_ptr(),
                    ch.as_mut_ptr(),
                    &mut from,
                    &mut class,
                    a,
                );
                (r, from)
            };
            let mut a = null_mut();
            assert_eq!(on_hello(&hello, hello.len(), &mut a), (LIFELINE_OK, 6));
            let (mut span, mut port) = (99u32, 99u16);
            assert_eq!(
                lifeline_tcp_acceptor_listen(a, &mut span, &mut port),
                LIFELINE_OK
            );
            assert_eq!((span, port), want);
            assert_eq!(
                lifeline_tcp_acceptor_listen(a, null_mut(), &mut port),
                LIFELINE_ERR_NULL
            );
            assert_eq!(
                lifeline_tcp_acceptor_listen(null(), &mut span, &mut port),
                LIFELINE_ERR_NULL
            );
            // The same HELLO as version 1 would have it: refused.
            hello[4] = 1;
            let mut a1 = null_mut();
            assert_eq!(
                on_hello(&hello, hello.len(), &mut a1).0,
                LIFELINE_ERR_HANDSHAKE
            );
            assert!(a1.is_null());
            // A version-1 HELLO's length is refused too.
            assert_eq!(
                on_hello(&hello, 46, &mut a1).0,
                LIFELINE_ERR_INVALID_ARGUMENT
            );
            lifeline_tcp_dialer_free(d);
            lifeline_tcp_acceptor_free(a);
        }
        lifeline_tcp_key_free(k);
    }
}
