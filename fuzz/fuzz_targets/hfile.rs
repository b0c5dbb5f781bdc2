#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| cellar_fuzz_common::targets::hfile(data));
