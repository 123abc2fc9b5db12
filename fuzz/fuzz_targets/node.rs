//! libFuzzer entry point; the body is [`lifeline_fuzz::node`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| lifeline_fuzz::node(data));
