//! Where buddy's bodies differ from OpenAI's OpenAPI description today: known and listed,
//! so that the contract test fails on any other, and on a listed one that is fixed (then
//! remove it here). Each: the sample's label (operation, error status or stream event),
//! the field's JSON pointer (array indices as `*`), and the validator's reason; `*` in
//! any of the three stands for any text.

pub(super) const KNOWN: &[(&str, &str, &str)] = &[
    // `Response.user`, `prompt_cache_key` and `safety_identifier` are strings, not
    // nullable, in the schema; buddy sends `null` when the request had none, as OpenAI's
    // own API does and as the Open Responses specification requires (present, nullable).
    ("*", "*/user", "type: null, the schema wants string"),
    (
        "*",
        "*/prompt_cache_key",
        "type: null, the schema wants string",
    ),
    (
        "*",
        "*/safety_identifier",
        "type: null, the schema wants string",
    ),
    // `Response.usage` is a `ResponseUsage` object, not nullable; buddy sends `null` while
    // a response is in progress (`response.created`, `response.in_progress`, background
    // responses read before they end, a cancelled one), as OpenAI's own API does: there is
    // no usage to report yet.
    ("*", "*/usage", "type: null, the schema wants object"),
    // A cancelled response's stream ends with `response.cancelled` (status `cancelled`),
    // the name OpenAI gives the event of a cancelled background response (its webhook
    // `response.cancelled`) and clients treat as an end; the spec's stream union lists
    // only `completed`, `failed` and `incomplete` ends, and `completed` would say it
    // completed.
    (
        "* event response.cancelled",
        "/type",
        "enum: \"response.cancelled\" is not one of the schema's values",
    ),
];
