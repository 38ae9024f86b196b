//! Arbitrary sequences of tool-call pieces (indexes, ids, names, argument fragments, as
//! every server's quirks send them): never a panic, and every call that comes back has
//! a name and an id.
#![no_main]

use buddy_providers::tool_call_assembler::{ToolCallAssembler, ToolCallDelta};
use libfuzzer_sys::fuzz_target;

const WORDS: [&str; 6] = ["", "a", "get_time", "call_1", "{\"x\":", "1}"];

fuzz_target!(|data: &[u8]| {
    let mut assembler = ToolCallAssembler::default();
    for piece in data.chunks(4) {
        let [index, id, name, args] = [0, 1, 2, 3].map(|i| piece.get(i).copied().unwrap_or(0));
        let pick = |b: u8| (b & 0x80 != 0).then(|| WORDS[usize::from(b) % WORDS.len()]);
        assembler.push(ToolCallDelta {
            index: (index & 0x80 == 0).then_some(i64::from(index % 5) - 1),
            id: pick(id),
            name: pick(name),
            arguments: pick(args),
        });
    }
    let (calls, _) = assembler.finish();
    for call in calls {
        assert!(!call.name.is_empty() && !call.id.is_empty());
    }
});
