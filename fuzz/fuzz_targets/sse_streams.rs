//! Arbitrary bytes, cut into arbitrary chunks, through buddy's SSE decoder and each
//! API's stream parser (OpenAI, Anthropic): never a panic, and the decoder's bounds hold.
#![no_main]

use std::collections::VecDeque;

use buddy_core::{ProviderError, Token};
use buddy_providers::anthropic::AnthropicStreamParser;
use buddy_providers::openai::OpenAiStreamParser;
use buddy_providers::sse::{SseDecoder, SseEvent};
use libfuzzer_sys::fuzz_target;

type OnEvent<'a> =
    &'a mut dyn FnMut(&SseEvent, &mut VecDeque<Token>) -> Result<bool, ProviderError>;
type OnEnd<'a> = &'a mut dyn FnMut(&mut VecDeque<Token>) -> Result<(), ProviderError>;

/// Feeds `body` in chunks of `step` bytes to a decoder and one parser.
fn run(body: &[u8], step: usize, on_event: OnEvent<'_>, on_end: OnEnd<'_>) {
    let mut decoder = SseDecoder::bounded(4096, 8192);
    let (mut events, mut out) = (Vec::new(), VecDeque::new());
    for chunk in body.chunks(step) {
        if decoder.push(chunk, &mut events).is_err() {
            return;
        }
        for event in events.drain(..) {
            assert!(event.data.len() <= 8192);
            if !matches!(on_event(&event, &mut out), Ok(false)) {
                return;
            }
        }
    }
    if decoder.finish(&mut events).is_ok() {
        for event in events.drain(..) {
            if !matches!(on_event(&event, &mut out), Ok(false)) {
                return;
            }
        }
        let _ = on_end(&mut out);
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&cut, body)) = data.split_first() else {
        return;
    };
    let step = usize::from(cut).max(1);
    let mut openai = OpenAiStreamParser::new("fuzz", "http://127.0.0.1/v1");
    let openai = std::cell::RefCell::new(&mut openai);
    run(
        body,
        step,
        &mut |e, out| openai.borrow_mut().event(e, out),
        &mut |out| openai.borrow_mut().end(out),
    );
    let mut anthropic = AnthropicStreamParser::new("fuzz", "http://127.0.0.1/v1/messages");
    let anthropic = std::cell::RefCell::new(&mut anthropic);
    run(
        body,
        step,
        &mut |e, out| anthropic.borrow_mut().event(e, out),
        &mut |out| anthropic.borrow_mut().end(out),
    );
});
