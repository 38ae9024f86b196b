//! Arbitrary `buddy.toml` files: a clear error naming the field, or a config; never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = buddy_cli::config::BuddyConfig::parse(text, "buddy.toml");
    }
});
