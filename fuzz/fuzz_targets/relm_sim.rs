//! libFuzzer entry point; the body is [`lifeline_fuzz::relm_sim`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| lifeline_fuzz::relm_sim(data));
