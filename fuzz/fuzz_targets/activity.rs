#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pith_fuzz::checks::activity(data));
