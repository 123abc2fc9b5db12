//! libFuzzer entry point; the body is [`lifeline_fuzz::tcp_handshake`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| lifeline_fuzz::tcp_handshake(data));
