//! Arbitrary bytes, cut into arbitrary chunks, through buddy's SSE decoder and the
//! OpenAI stream parser: never a panic, and the decoder's bounds hold.
#![no_main]

use std::collections::VecDeque;

use buddy_providers::openai::OpenAiStreamParser;
use buddy_providers::sse::SseDecoder;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&cut, body)) = data.split_first() else {
        return;
    };
    let mut decoder = SseDecoder::bounded(4096, 8192);
    let mut parser = OpenAiStreamParser::new("fuzz", "http://127.0.0.1/v1");
    let (mut events, mut out) = (Vec::new(), VecDeque::new());
    let step = usize::from(cut).max(1);
    for chunk in body.chunks(step) {
        if decoder.push(chunk, &mut events).is_err() {
            return;
        }
        for event in events.drain(..) {
            assert!(event.data.len() <= 8192);
            match parser.event(&event, &mut out) {
                Ok(true) | Err(_) => return,
                Ok(false) => {}
            }
        }
    }
    if decoder.finish(&mut events).is_ok() {
        for event in events.drain(..) {
            if !matches!(parser.event(&event, &mut out), Ok(false)) {
                return;
            }
        }
        let _ = parser.end(&mut out);
    }
});
