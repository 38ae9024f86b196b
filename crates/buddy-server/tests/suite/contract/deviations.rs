//! Where buddy's bodies differ from OpenAI's OpenAPI description today: known and listed,
//! so that the contract test fails on any other, and on a listed one that is fixed (then
//! remove it here). Each: the sample's label (operation, error status or stream event),
//! the field's JSON pointer (array indices as `*`), and the validator's reason; `*` in
//! any of the three stands for any text.

pub(super) const KNOWN: &[(&str, &str, &str)] = &[
    // `Response.user`, `prompt_cache_key` and `safety_identifier` are strings, not
    // nullable, in the schema; buddy sends `null` when the request had none (so does
    // OpenAI's own API: the fix is to omit them).
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
    // responses read before they end, a cancelled one).
    ("*", "*/usage", "type: null, the schema wants object"),
    // `OutputTextContent` requires `logprobs` (an array; `[]` when none were asked for):
    // in responses' output, conversation items, and the content-part events.
    (
        "*",
        "*/content/*",
        "required: 'logprobs' is a required property",
    ),
    (
        "* event response.content_part.*",
        "/part",
        "required: 'logprobs' is a required property",
    ),
    // `ResponseErrorEvent` has `code`, `message` and `param` at its top level; buddy nests
    // them in an `error` object.
    (
        "POST /v1/responses event error",
        "",
        "required: 'code' is a required property",
    ),
    (
        "POST /v1/responses event error",
        "",
        "required: 'message' is a required property",
    ),
    (
        "POST /v1/responses event error",
        "",
        "required: 'param' is a required property",
    ),
    // `Response.error.code` is one of `ResponseErrorCode` (`server_error`,
    // `rate_limit_exceeded`, …); buddy's codes (`provider_error`) are its own.
    (
        "*",
        "*/error/code",
        "enum: \"provider_error\" is not one of the schema's values",
    ),
    // `POST /responses/{id}/cancel` answers the whole `Response`; buddy answers only
    // `{id, object, status}`.
    ("POST /v1/responses/{response_id}/cancel", "", "required: *"),
];
