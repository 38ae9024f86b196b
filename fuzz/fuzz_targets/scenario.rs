//! Arbitrary scenario files: a clear error or a scenario, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = buddy_scripted::Scenario::parse(text, "fuzz.json");
    }
});
