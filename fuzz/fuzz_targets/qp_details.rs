//! libFuzzer entry point; the body is [`lifeline_fuzz::qp_details`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| lifeline_fuzz::qp_details(data));
