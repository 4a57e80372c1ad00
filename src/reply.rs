//! The filter's own answers: a request it answers goes no further.

/// A local reply: status, JSON body, the headers beside content-type, and
/// its response-code details (Envoy's `%RESPONSE_CODE_DETAILS%` in an
/// access log: `hookstamp.<what>`, one for each answer and reason).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reply {
    pub status: u32,
    pub body: &'static str,
    pub headers: &'static [(&'static str, &'static str)],
    pub details: &'static str,
}

/// Under the prefix, naming no configured source (or not canonically).
pub const UNKNOWN_SOURCE: Reply = Reply {
    status: 404,
    body: r#"{"error":"unknown_source"}"#,
    headers: &[],
    details: "hookstamp.unknown_source",
};

/// Under the prefix with a method other than POST, GET or HEAD.
pub const METHOD_NOT_ALLOWED: Reply = Reply {
    status: 405,
    body: r#"{"error":"method_not_allowed"}"#,
    headers: &[("allow", "POST")],
    details: "hookstamp.method_not_allowed",
};

/// The worker's held-bytes budget is full: the provider retries later.
pub const BUSY: Reply = Reply {
    status: 503,
    body: r#"{"error":"busy"}"#,
    headers: &[("retry-after", "1")],
    details: "hookstamp.busy",
};

/// The body did not arrive within max_hold_ms of the headers.
pub const BODY_TIMEOUT: Reply = Reply {
    status: 408,
    body: r#"{"error":"body_timeout"}"#,
    headers: &[("connection", "close")],
    details: "hookstamp.body_timeout",
};

/// The body was still arriving after slow_body_ms while the budget was
/// fuller than three quarters: answered to keep room for deliveries that
/// arrive at once.
pub const SLOW_BODY: Reply = Reply {
    status: 408,
    body: r#"{"error":"body_too_slow"}"#,
    headers: &[("connection", "close")],
    details: "hookstamp.body_too_slow",
};

/// The filter could not do its work (a host call failed, no config): never
/// forwarded unstamped.
pub const INTERNAL: Reply = Reply {
    status: 500,
    body: r#"{"error":"hookstamp_internal"}"#,
    headers: &[],
    details: "hookstamp.internal",
};

/// The signature is missing, malformed, wrong or expired (on_failure reject).
const INVALID_SIGNATURE: Reply = Reply {
    status: 401,
    body: r#"{"error":"invalid_signature"}"#,
    headers: &[],
    details: "hookstamp.invalid_signature",
};

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
pub const TOO_LARGE_TO_VERIFY: Reply = Reply {
    status: 413,
    body: r#"{"error":"body_too_large_to_verify"}"#,
    headers: &[("connection", "close")],
    details: "hookstamp.body_too_large_to_verify",
};
