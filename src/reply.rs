//! The filter's own answers: a request it answers goes no further.

use std::borrow::Cow;

/// A local reply: status, body (JSON, unless `content_type` says
/// otherwise), the headers beside content-type, and its response-code
/// details (Envoy's `%RESPONSE_CODE_DETAILS%` in an access log:
/// `hookstamp.<what>`, one for each answer and reason). A body is made
/// only for a handshake's answer; every other is a constant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub status: u32,
    pub body: Cow<'static, str>,
    pub content_type: &'static str,
    pub headers: &'static [(&'static str, &'static str)],
    pub details: &'static str,
}

const JSON: &str = "application/json";

/// An answer after which the client's connection is closed: a body it
/// was still sending is not read.
const CLOSE: &[(&str, &str)] = &[("connection", "close")];

/// A constant answer whose body is `{"error":"<error>"}` and whose
/// details are `hookstamp.<details>`, with these headers (none if left out).
macro_rules! error {
    ($status:expr, $error:literal, $details:literal $(, $headers:expr)?) => {
        Reply {
            status: $status,
            body: Cow::Borrowed(concat!(r#"{"error":""#, $error, r#""}"#)),
            content_type: JSON,
            headers: error!(@headers $($headers)?),
            details: concat!("hookstamp.", $details),
        }
    };
    (@headers) => { &[] };
    (@headers $headers:expr) => { $headers };
}

/// Under the prefix, naming no configured source (or not canonically).
pub const UNKNOWN_SOURCE: Reply = error!(404, "unknown_source", "unknown_source");

/// Under the prefix with a method other than POST, GET or HEAD.
pub const METHOD_NOT_ALLOWED: Reply = error!(
    405,
    "method_not_allowed",
    "method_not_allowed",
    &[("allow", "POST")]
);

/// The worker's held-bytes budget is full: the provider retries later.
pub const BUSY: Reply = error!(503, "busy", "busy", &[("retry-after", "1")]);

/// The worker keeps max_streams streamed requests open upstream already:
/// the provider retries later.
pub const STREAMS_FULL: Reply = error!(503, "busy", "streams_full", &[("retry-after", "1")]);

/// The body did not arrive within max_hold_ms of the headers.
pub const BODY_TIMEOUT: Reply = error!(408, "body_timeout", "body_timeout", CLOSE);

/// The body was still arriving after slow_body_ms while the budget was
/// fuller than three quarters, or a streamed body came slower than
/// min_stream_rate: answered to keep room for deliveries that arrive at
/// once.
pub const SLOW_BODY: Reply = error!(408, "body_too_slow", "body_too_slow", CLOSE);

/// The filter could not do its work (a host call failed, no config): never
/// forwarded unstamped.
pub const INTERNAL: Reply = error!(500, "hookstamp_internal", "internal");

/// The signature is missing, malformed, wrong or expired (on_failure reject).
const INVALID_SIGNATURE: Reply = error!(401, "invalid_signature", "invalid_signature");

/// `INVALID_SIGNATURE`, its details naming why: `hookstamp.invalid_signature.<reason>`.
pub fn invalid_signature(reason: crate::verify::Reason) -> Reply {
    use crate::verify::Reason;
    let details = match reason {
        Reason::Missing => "hookstamp.invalid_signature.missing",
        Reason::Malformed => "hookstamp.invalid_signature.malformed",
        Reason::Mismatch => "hookstamp.invalid_signature.mismatch",
        Reason::Expired => "hookstamp.invalid_signature.expired",
        Reason::OverLimit => return TOO_LARGE_TO_VERIFY,
    };
    Reply {
        details,
        ..INVALID_SIGNATURE
    }
}

/// The body is over the limit the filter can verify (on_failure reject).
pub const TOO_LARGE_TO_VERIFY: Reply = error!(
    413,
    "body_too_large_to_verify", "body_too_large_to_verify", CLOSE
);

/// A handshake answered at the edge (see `handshake`).
pub fn handshake(body: String, content_type: &'static str) -> Reply {
    Reply {
        status: 200,
        body: Cow::Owned(body),
        content_type,
        headers: &[],
        details: "hookstamp.handshake",
    }
}

/// A handshake whose token is wrong (Meta's `hub.verify_token`).
pub const HANDSHAKE_REFUSED: Reply = error!(403, "handshake_refused", "handshake_refused");

/// A dropped event (see `events`): answered 200 so the provider does not
/// retry it, and never forwarded.
pub const DROPPED: Reply = Reply {
    status: 200,
    body: Cow::Borrowed(r#"{"dropped":true}"#),
    content_type: JSON,
    headers: &[],
    details: "hookstamp.event_dropped",
};

/// A streamed request whose body ended in trailers after its last byte was
/// held back: the byte cannot be let through with them, so the request is
/// refused, never completed short (see `verify::Mode::Stream`).
pub const STREAM_TRAILERS: Reply = error!(400, "trailers_after_a_streamed_body", "stream_trailers");
