//! Arbitrary non-streamed response bodies through both APIs' parsers: never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(body) = std::str::from_utf8(data) else {
        return;
    };
    let _ = buddy_providers::openai::parse_response("fuzz", "http://127.0.0.1/v1", body);
    let _ = buddy_providers::anthropic::parse_response("fuzz", "http://127.0.0.1/v1", body);
});
