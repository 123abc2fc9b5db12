//! libFuzzer entry point; the body is [`lifeline_fuzz::decode`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| lifeline_fuzz::decode(data));
