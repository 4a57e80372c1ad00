//! Config parsing and checking: never a panic; a config that loads routes
//! each of its sources, and loads the same way twice.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../tests/common/fuzz_input.rs"]
mod fuzz_input;

fuzz_target!(|data: &[u8]| fuzz_input::check_config(data));
