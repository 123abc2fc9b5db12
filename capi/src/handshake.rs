//! `lifeline_tcp_*`: the TCP transport's connection handshake (`lifeline-transport-tcp`'s
//! sans-IO steps), so a C program that owns its sockets interoperates with `lifeline node`.
//!
//! ```text
//! dialer → acceptor  HELLO      52 B   lifeline_tcp_dialer_new (_announcing)
//! acceptor → dialer  CHALLENGE  72 B   lifeline_tcp_acceptor_on_hello
//! dialer → acceptor  PROOF      32 B   lifeline_tcp_dialer_on_challenge
//! acceptor → dialer  RESULT   1|9 B    lifeline_tcp_verdict_encode / lifeline_tcp_decode_verdict
//! ```
//!
//! Both sides prove the cluster key (keyed BLAKE3 over both fresh nonces). Nonces must be
//! fresh random bytes for every handshake (e.g. `getrandom`). The acceptor must check, before
//! it sends the CHALLENGE, that the claimed rank is in its address book and that the connection
//! comes from that rank's IP (the Rust adapter does; a dialer binds its address-book IP as
//! source on loopback addresses). After an accepted RESULT the connection carries the core's
//! frames back to back. Every two ranks hold one connection per traffic class (the HELLO's
//! class).
//!
//! Handshake version 2: the HELLO announces the dialer's span and listening port
//! (`lifeline_tcp_dialer_new_announcing`), so an acceptor whose book lacks the dialer (a launched
//! rank that started late, dialled by a joiner admitted past its peers file) can accept and
//! learn it: `lifeline_tcp_acceptor_listen` reads what was announced; accept only a rank at or
//! past the book's given span, below `given + join.max_per_view × 64`, below the announced span
//! and with a port, and learn it at the connection's IP and that port once the PROOF checks
//! (what the Rust adapter does). A version-1 HELLO is refused (`LIFELINE_ERR_HANDSHAKE`).

use lifeline_core::tree::Rank;
use lifeline_core::Class;
use lifeline_transport_tcp::handshake::{
    decode_verdict, Acceptor, Dialer, HandshakeError, Listen, Verdict, CHALLENGE_LEN, HELLO_LEN,
    RESULT_MAX_LEN,
};
use lifeline_transport_tcp::ClusterKey;

use crate::catch;
use crate::node::{put, LIFELINE_CLASS_CONTROL, LIFELINE_CLASS_DATA};
use crate::result::*;

/// Bytes of a HELLO (handshake version 2).
pub const LIFELINE_TCP_HELLO_LEN: usize = 52;
/// Bytes of a CHALLENGE.
pub const LIFELINE_TCP_CHALLENGE_LEN: usize = 72;
/// Bytes of a PROOF.
pub const LIFELINE_TCP_PROOF_LEN: usize = 32;
/// Bytes of a nonce.
pub const LIFELINE_TCP_NONCE_LEN: usize = 32;
/// The longest RESULT (a "removed" verdict with its epoch).
pub const LIFELINE_TCP_RESULT_MAX_LEN: usize = 9;

/// RESULT: accepted; frames may flow.
pub const LIFELINE_VERDICT_ACCEPT: u32 = 0;
/// RESULT: the acceptor's own connection for this class wins the tie-break (dial outcome
/// `LIFELINE_DIAL_DUPLICATE`).
pub const LIFELINE_VERDICT_DUPLICATE: u32 = 1;
/// RESULT: refused (the acceptor will not talk to this rank).
pub const LIFELINE_VERDICT_REFUSE: u32 = 2;
/// RESULT: the dialer was removed from the cluster as of the epoch: call
/// `lifeline_node_handle_fenced`.
pub const LIFELINE_VERDICT_REMOVED: u32 = 3;

/// An opaque cluster key (32 bytes derived from the shared secret).
#[derive(Debug)]
pub struct TcpKey(ClusterKey);

/// An opaque dialer's handshake state.
#[derive(Debug)]
pub struct TcpDialer(Dialer);

/// An opaque acceptor's handshake state (between CHALLENGE and PROOF).
#[derive(Debug)]
pub struct TcpAcceptor(Acceptor);

fn class_of(c: u32) -> Option<Class> {
    match c {
        LIFELINE_CLASS_CONTROL => Some(Class::Control),
        LIFELINE_CLASS_DATA => Some(Class::Data),
        _ => None,
    }
}

fn class_code(c: Class) -> u32 {
    match c {
        Class::Control => LIFELINE_CLASS_CONTROL,
        Class::Data => LIFELINE_CLASS_DATA,
    }
}

/// The handshake errors as result codes.
fn code(e: &HandshakeError) -> LifelineResult {
    match e {
        HandshakeError::BadMac => LIFELINE_ERR_BAD_MAC,
        _ => LIFELINE_ERR_HANDSHAKE,
    }
}

/// Copies exactly `N` bytes from `ptr` (`len` must be `N`).
///
/// # Safety
/// `ptr` is NULL or `len` readable bytes.
unsafe fn array<const N: usize>(ptr: *const u8, len: usize) -> Result<[u8; N], LifelineResult> {
    if ptr.is_null() {
        return Err(LIFELINE_ERR_NULL);
    }
    if len != N {
        return Err(LIFELINE_ERR_INVALID_ARGUMENT);
    }
    let mut a = [0u8; N];
    // SAFETY: non-NULL and `len == N` readable bytes (the caller's guarantee).
    a.copy_from_slice(unsafe { std::slice::from_raw_parts(ptr, N) });
    Ok(a)
}

/// Copies `bytes` to `out` (at least `bytes.len()` writable bytes).
///
/// # Safety
/// `out` is non-NULL with `bytes.len()` writable bytes.
unsafe fn write_out(out: *mut u8, bytes: &[u8]) {
    // SAFETY: the caller guarantees room; the regions cannot overlap (`bytes` is ours).
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), out, bytes.len()) };
}

/// Makes the cluster key from the secret `secret[0..len]` (exact bytes, e.g. a key file's
/// whole contents). `LIFELINE_ERR_INVALID_ARGUMENT` for an empty secret; `*out` is NULL on any
/// error.
///
/// # Safety
/// `secret` is NULL or `len` readable bytes; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn lifeline_tcp_key_new(
    secret: *const u8,
    len: usize,
    out: *mut *mut TcpKey,
) -> LifelineResult {
    if out.is_null() {
        return LIFELINE_ERR_NULL;
    }
    // SAFETY: non-NULL and writable (the caller's guarantee).
    unsafe { put(out, std::ptr::null_mut()) };
    if secret.is_null() {
        return LIFELINE_ERR_NULL;
    }
    catch(LIFELINE_ERR_PANIC, || {
        // SAFETY: non-NULL and `len` readable bytes (the caller's guarantee).
        let s = unsafe { std::slice::from_raw_parts(secret, len) };
        match ClusterKey::from_secret(s) {
            Ok(k) => {
                // SAFETY: non-NULL and writable (checked above).
                unsafe { put(out, Box::into_raw(Box::new(TcpKey(k)))) };
                LIFELINE_OK
            }
            Err(_) => LIFELINE_ERR_INVALID_ARGUMENT,
        }
    })
}

/// Releases a key. NULL is a no-op.
///
/// # Safety
/// `key` is NULL or from `lifeline_tcp_key_new`, not yet freed.
#[no_mangle]
pub unsafe extern "C" fn lifeline_tcp_key_free(key: *mut TcpKey) {
    if !key.is_null() {
        // SAFETY: from lifeline_tcp_key_new (a Box), freed once (the caller's guarantee).
        let b = unsafe { Box::from_raw(key) };
        catch((), || drop(b));
    }
}

/// Starts a dial's handshake: rank `me` proves `key` to rank `to` for a connection of `class`
/// (`LIFELINE_CLASS_*`), with a fresh random `nonce[0..32]`. Writes the HELLO to send to
/// `hello[0..LIFELINE_TCP_HELLO_LEN]`. On an error `*out` is NULL (`LIFELINE_ERR_INVALID_ARGUMENT`:
/// an unknown class).
///
/// # Safety
/// `key` is NULL or live; `nonce` is NULL or 32 readable bytes; `hello` is NULL or
/// `LIFELINE_TCP_HELLO_LEN` writable bytes; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn lifeline_tcp_dialer_new(
    key: *const TcpKey,
    me: u32,
    to: u32,
    class: u32,
    nonce: *const u8,
    hello: *mut u8,
    out: *mut *mut TcpDialer,
) -> LifelineResult {
    // SAFETY: the caller's guarantees, passed on unchanged.
    unsafe { lifeline_tcp_dialer_new_announcing(key, me, to, class, 0, 0, nonce, hello, out) }
}

/// `lifeline_tcp_dialer_new`, announcing in the HELLO this rank's `span` (one past the highest
/// rank it knows) and the `port` it listens on at the IP it dials from, so an acceptor whose
/// address book lacks `me` can accept and learn it (0 and 0: nothing announced, as
/// `lifeline_tcp_dialer_new`).
///
/// # Safety
/// As `lifeline_tcp_dialer_new`.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn lifeline_tcp_dialer_new_announcing(
    key: *const TcpKey,
    me: u32,
    to: u32,
    class: u32,
    span: u32,
    port: u16,
    nonce: *const u8,
    hello: *mut u8,
    out: *mut *mut TcpDialer,
) -> LifelineResult {
    if out.is_null() {
        return LIFELINE_ERR_NULL;
    }
    // SAFETY: non-NULL and writable (the caller's guarantee).
    unsafe { put(out, std::ptr::null_mut()) };
    // SAFETY: the caller guarantees `key` is NULL or live.
    let Some(k) = (unsafe { key.as_ref() }) else {
        return LIFELINE_ERR_NULL;
    };
    if hello.is_null() {
        return LIFELINE_ERR_NULL;
    }
    // SAFETY: `nonce` is NULL or 32 readable bytes (the caller's guarantee).
    let nonce = match unsafe { array::<32>(nonce, 32) } {
        Ok(n) => n,
        Err(e) => return e,
    };
    let Some(class) = class_of(class) else {
        return LIFELINE_ERR_INVALID_ARGUMENT;
    };
    catch(LIFELINE_ERR_PANIC, || {
        let d = Dialer::announcing(
            &k.0,
            Rank(me),
            Rank(to),
            class,
            Listen { span, port },
            nonce,
        );
        // SAFETY: `hello` is non-NULL with HELLO_LEN writable bytes (the caller's guarantee).
        unsafe { write_out(hello, d.hello()) };
        // SAFETY: non-NULL and writable (checked above).
        unsafe { put(out, Box::into_raw(Box::new(TcpDialer(d)))) };
        LIFELINE_OK
    })
}

/// Checks the acceptor's CHALLENGE (`challenge[0..len]`, `len` must be
/// `LIFELINE_TCP_CHALLENGE_LEN`) and writes the PROOF to send to
/// `proof[0..LIFELINE_TCP_PROOF_LEN]`. On an error nothing may be sent (close):
/// `LIFELINE_ERR_BAD_MAC` (the peer does not hold the key), `LIFELINE_ERR_HANDSHAKE` (not a
/// handshake, or another rank answered), `LIFELINE_ERR_INVALID_ARGUMENT` (a wrong length).
///
/// # Safety
/// `dialer` is NULL or live; `challenge` is NULL or `len` readable bytes; `proof` is NULL or
/// `LIFELINE_TCP_PROOF_LEN` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn lifeline_tcp_dialer_on_challenge(
    dialer: *const TcpDialer,
    challenge: *const u8,
    len: usize,
    proof: *mut u8,
) -> LifelineResult {
    // SAFETY: the caller guarantees `dialer` is NULL or live.
    let Some(d) = (unsafe { dialer.as_ref() }) else {
        return LIFELINE_ERR_NULL;
    };
    if proof.is_null() {
        return LIFELINE_ERR_NULL;
    }
    // SAFETY: `challenge` is NULL or `len` readable bytes (the caller's guarantee).
    let ch = match unsafe { array::<CHALLENGE_LEN>(challenge, len) } {
        Ok(c) => c,
        Err(e) => return e,
    };
    catch(LIFELINE_ERR_PANIC, || match d.0.on_challenge(&ch) {
        Ok(p) => {
            // SAFETY: `proof` is non-NULL with 32 writable bytes (the caller's guarantee).
            unsafe { write_out(proof, &p) };
            LIFELINE_OK
        }
        Err(e) => code(&e),
    })
}

/// Releases a dialer. NULL is a no-op.
///
/// # Safety
/// `dialer` is NULL or from `lifeline_tcp_dialer_new`, not yet freed.
#[no_mangle]
pub unsafe extern "C" fn lifeline_tcp_dialer_free(dialer: *mut TcpDialer) {
    if !dialer.is_null() {
        // SAFETY: from lifeline_tcp_dialer_new (a Box), freed once (the caller's guarantee).
        let b = unsafe { Box::from_raw(dialer) };
        catch((), || drop(b));
    }
}

/// Decodes the RESULT at the start of `bytes[0..len]`: `LIFELINE_DONE` while more bytes are
/// needed (nothing written), else `LIFELINE_OK` with `*verdict` (`LIFELINE_VERDICT_*`), `*epoch`
/// (for `LIFELINE_VERDICT_REMOVED`, else 0) and `*consumed` (the bytes it took; frames follow an
/// accepted RESULT). An unknown RESULT byte reads as `LIFELINE_VERDICT_REFUSE`.
///
/// # Safety
/// `bytes` is NULL (only with `len` 0) or `len` readable bytes; the outputs are NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn lifeline_tcp_decode_verdict(
    bytes: *const u8,
    len: usize,
    verdict: *mut u32,
    epoch: *mut u64,
    consumed: *mut usize,
) -> LifelineResult {
    if verdict.is_null() || epoch.is_null() || consumed.is_null() || (bytes.is_null() && len > 0) {
        return LIFELINE_ERR_NULL;
    }
    catch(LIFELINE_ERR_PANIC, || {
        let b: &[u8] = if len == 0 {
            &[]
        } else {
            // SAFETY: non-NULL and `len` readable bytes (the caller's guarantee).
            unsafe { std::slice::from_raw_parts(bytes, len.min(RESULT_MAX_LEN)) }
        };
        let Some((v, n)) = decode_verdict(b) else {
            return LIFELINE_DONE;
        };
        let (code, e) = match v {
            Verdict::Accept => (LIFELINE_VERDICT_ACCEPT, 0),
            Verdict::Duplicate => (LIFELINE_VERDICT_DUPLICATE, 0),
            Verdict::Refuse => (LIFELINE_VERDICT_REFUSE, 0),
            Verdict::Removed { epoch } => (LIFELINE_VERDICT_REMOVED, epoch),
        };
        // SAFETY: all three are non-NULL (checked above) and writable (the caller's guarantee).
        unsafe {
            put(verdict, code);
            put(epoch, e);
            put(consumed, n);
        }
        LIFELINE_OK
    })
}

/// The RESULT bytes for `verdict` (`LIFELINE_VERDICT_*`; `epoch` is used by
/// `LIFELINE_VERDICT_REMOVED` only) in `out[0..LIFELINE_TCP_RESULT_MAX_LEN]`, their number in
/// `*len`. `LIFELINE_ERR_INVALID_ARGUMENT` for an unknown verdict.
///
/// # Safety
/// `out` is NULL or `LIFELINE_TCP_RESULT_MAX_LEN` writable bytes; `len` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn lifeline_tcp_verdict_encode(
    verdict: u32,
    epoch: u64,
    out: *mut u8,
    len: *mut usize,
) -> LifelineResult {
    if out.is_null() || len.is_null() {
        return LIFELINE_ERR_NULL;
    }
    let v = match verdict {
        LIFELINE_VERDICT_ACCEPT => Verdict::Accept,
        LIFELINE_VERDICT_DUPLICATE => Verdict::Duplicate,
        LIFELINE_VERDICT_REFUSE => Verdict::Refuse,
        LIFELINE_VERDICT_REMOVED => Verdict::Removed { epoch },
        _ => return LIFELINE_ERR_INVALID_ARGUMENT,
    };
    catch(LIFELINE_ERR_PANIC, || {
        let (b, n) = v.encode();
        // SAFETY: `out` has RESULT_MAX_LEN writable bytes and `len` is writable (the caller's
        // guarantee); both are non-NULL (checked above).
        unsafe {
            write_out(out, &b[..n]);
            put(len, n);
        }
        LIFELINE_OK
    })
}

/// Checks a HELLO (`hello[0..len]`, `len` must be `LIFELINE_TCP_HELLO_LEN`) received by rank
/// `me`: well formed, addressed to `me`, from another rank. With a fresh random
/// `nonce[0..32]`, writes the CHALLENGE to `challenge[0..LIFELINE_TCP_CHALLENGE_LEN]`, the
/// claimed rank to `*from` and the class (`LIFELINE_CLASS_*`) to `*class`, and the state for
/// the PROOF to `*out`. Before sending the CHALLENGE the caller checks that `*from` is in its
/// address book and that the connection comes from its IP, or for a rank past the book what
/// `lifeline_tcp_acceptor_listen` says (else: close, send nothing). Errors
/// (`*out` NULL, nothing to send: close): `LIFELINE_ERR_HANDSHAKE` (garbage, another
/// handshake version, another target, its own rank), `LIFELINE_ERR_INVALID_ARGUMENT` (a wrong
/// length).
///
/// # Safety
/// `key` is NULL or live; `hello` is NULL or `len` readable bytes; `nonce` is NULL or 32
/// readable bytes; `challenge` is NULL or `LIFELINE_TCP_CHALLENGE_LEN` writable bytes; `from`,
/// `class` and `out` are NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn lifeline_tcp_acceptor_on_hello(
    key: *const TcpKey,
    me: u32,
    hello: *const u8,
    len: usize,
    nonce: *const u8,
    challenge: *mut u8,
    from: *mut u32,
    class: *mut u32,
    out: *mut *mut TcpAcceptor,
) -> LifelineResult {
    if out.is_null() {
        return LIFELINE_ERR_NULL;
    }
    // SAFETY: non-NULL and writable (the caller's guarantee).
    unsafe { put(out, std::ptr::null_mut()) };
    // SAFETY: the caller guarantees `key` is NULL or live.
    let Some(k) = (unsafe { key.as_ref() }) else {
        return LIFELINE_ERR_NULL;
    };
    if challenge.is_null() || from.is_null() || class.is_null() {
        return LIFELINE_ERR_NULL;
    }
    // SAFETY: `hello` is NULL or `len` readable bytes (the caller's guarantee).
    let raw = match unsafe { array::<HELLO_LEN>(hello, len) } {
        Ok(h) => h,
        Err(e) => return e,
    };
    // SAFETY: `nonce` is NULL or 32 readable bytes (the caller's guarantee).
    let nonce = match unsafe { array::<32>(nonce, 32) } {
        Ok(n) => n,
        Err(e) => return e,
    };
    catch(LIFELINE_ERR_PANIC, || {
        match Acceptor::on_hello(&k.0, Rank(me), &raw, nonce, |_| Ok(())) {
            Ok((acc, ch)) => {
                let h = acc.hello();
                // SAFETY: the outputs are non-NULL (checked above) and writable, `challenge`
                // with CHALLENGE_LEN bytes (the caller's guarantee).
                unsafe {
                    write_out(challenge, &ch);
                    put(from, h.from.0);
                    put(class, class_code(h.class));
                    put(out, Box::into_raw(Box::new(TcpAcceptor(acc))));
                }
                LIFELINE_OK
            }
            Err(e) => code(&e),
        }
    })
}

/// What the HELLO that `acceptor` checked announced: the dialer's span in `*span` and its
/// listening port in `*port` (0 and 0: nothing). For a claimed rank absent from the book: see
/// the module documentation for when to accept and learn it.
///
/// # Safety
/// `acceptor` is NULL or live; `span` and `port` are NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn lifeline_tcp_acceptor_listen(
    acceptor: *const TcpAcceptor,
    span: *mut u32,
    port: *mut u16,
) -> LifelineResult {
    // SAFETY: the caller guarantees `acceptor` is NULL or live.
    let Some(a) = (unsafe { acceptor.as_ref() }) else {
        return LIFELINE_ERR_NULL;
    };
    if span.is_null() || port.is_null() {
        return LIFELINE_ERR_NULL;
    }
    let l = a.0.hello().listen;
    // SAFETY: both non-NULL (checked above) and writable (the caller's guarantee).
    unsafe {
        put(span, l.span);
        put(port, l.port);
    }
    LIFELINE_OK
}

/// Checks the dialer's PROOF (`proof[0..len]`, `len` must be `LIFELINE_TCP_PROOF_LEN`):
/// `LIFELINE_OK` authenticates the dialer as the rank `lifeline_tcp_acceptor_on_hello` returned
/// (then decide the verdict with `lifeline_links_handle_accepted` and send it);
/// `LIFELINE_ERR_BAD_MAC`: it does not hold the key (close, send nothing).
///
/// # Safety
/// `acceptor` is NULL or live; `proof` is NULL or `len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn lifeline_tcp_acceptor_on_proof(
    acceptor: *const TcpAcceptor,
    proof: *const u8,
    len: usize,
) -> LifelineResult {
    // SAFETY: the caller guarantees `acceptor` is NULL or live.
    let Some(a) = (unsafe { acceptor.as_ref() }) else {
        return LIFELINE_ERR_NULL;
    };
    // SAFETY: `proof` is NULL or `len` readable bytes (the caller's guarantee).
    let p = match unsafe { array::<32>(proof, len) } {
        Ok(p) => p,
        Err(e) => return e,
    };
    catch(LIFELINE_ERR_PANIC, || match a.0.on_proof(&p) {
        Ok(_) => LIFELINE_OK,
        Err(e) => code(&e),
    })
}

/// Releases an acceptor. NULL is a no-op.
///
/// # Safety
/// `acceptor` is NULL or from `lifeline_tcp_acceptor_on_hello`, not yet freed.
#[no_mangle]
pub unsafe extern "C" fn lifeline_tcp_acceptor_free(acceptor: *mut TcpAcceptor) {
    if !acceptor.is_null() {
        // SAFETY: from lifeline_tcp_acceptor_on_hello (a Box), freed once (the caller's
        // guarantee).
        let b = unsafe { Box::from_raw(acceptor) };
        catch((), || drop(b));
    }
}

#[cfg(test)]
#[path = "handshake_tests.rs"]
mod tests;
