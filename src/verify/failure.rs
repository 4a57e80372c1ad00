//! Why a signature did not verify: the reason (the metric's label, the
//! reply's details) and what exactly failed (for `explain` and the debug
//! log), named by header and count, never by a secret.

/// Why a signature did not verify; the `reason` label of the metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    Missing,
    Malformed,
    Mismatch,
    Expired,
    OverLimit,
}

impl Reason {
    pub const ALL: [Reason; 5] = [
        Reason::Missing,
        Reason::Malformed,
        Reason::Mismatch,
        Reason::Expired,
        Reason::OverLimit,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Missing => "missing",
            Reason::Malformed => "malformed",
            Reason::Mismatch => "mismatch",
            Reason::Expired => "expired",
            Reason::OverLimit => "too_large",
        }
    }
}

/// Why a signature did not verify, in full: the reason (the metric's label
/// and the reply's details) and what exactly failed, for `explain` and the
/// debug log. It names headers and counts, never a secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub reason: Reason,
    pub why: Why,
}

/// What exactly failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Why {
    /// A header the scheme signs or needs is absent.
    NoHeader(String),
    /// A header is not text (not UTF-8).
    NotText(String),
    /// A header's value is not in the scheme's form: what it should be.
    Form {
        header: String,
        expected: &'static str,
    },
    /// The header carries only signature versions the scheme does not
    /// check (e.g. Standard Webhooks' asymmetric `v1a`), named.
    Unsupported {
        header: String,
        versions: Vec<String>,
    },
    /// The timestamp is not a whole number of seconds.
    NotANumber(String),
    /// The timestamp is `skew_s` seconds from the clock (negative: in the
    /// past), more than the tolerance.
    Skew {
        header: String,
        skew_s: i64,
        tolerance_s: u64,
    },
    /// No signature in the header matched the HMAC of any secret.
    Mismatch { signatures: usize, secrets: usize },
    /// The body could be a CRC token, which this source's CRC handshake
    /// signs for anyone: never verified.
    TokenBody,
    /// Where Ed25519 is in play: no HMAC signature matched any HMAC secret
    /// and no Ed25519 signature verified under any public key (each
    /// counted).
    NoMatch {
        hmac_signatures: usize,
        secrets: usize,
        ed25519_signatures: usize,
        public_keys: usize,
    },
    /// Twilio: the URL's `bodySHA256` is not the body's SHA-256.
    BodyHash,
    /// The body is over max_json_bytes: never verified.
    OverLimit,
}

impl Failure {
    pub(super) fn new(reason: Reason, why: Why) -> Self {
        Failure { reason, why }
    }

    pub fn over_limit() -> Self {
        Failure::new(Reason::OverLimit, Why::OverLimit)
    }

    pub(super) fn missing(header: &str) -> Self {
        Failure::new(Reason::Missing, Why::NoHeader(header.to_owned()))
    }

    pub(super) fn form(header: &str, expected: &'static str) -> Self {
        Failure::new(
            Reason::Malformed,
            Why::Form {
                header: header.to_owned(),
                expected,
            },
        )
    }
}

/// The versions named in a signature list that has none the scheme checks:
/// the short alphanumeric tokens before a separator (at most four, each at
/// most 8 characters, so a hostile header cannot make this long).
pub(super) fn versions<'v>(items: impl Iterator<Item = &'v str>, sep: char) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for item in items {
        let Some((v, _)) = item.trim().split_once(sep) else {
            continue;
        };
        let token = !v.is_empty() && v.len() <= 8 && v.bytes().all(|b| b.is_ascii_alphanumeric());
        if token && !out.iter().any(|o| o == v) && out.len() < 4 {
            out.push(v.to_owned());
        }
    }
    out
}

/// A signature list with no version the scheme checks: unsupported when it
/// names others (e.g. only `v2`), else malformed as `otherwise` says.
pub(super) fn unsupported_or(
    header: &str,
    versions: Vec<String>,
    otherwise: impl FnOnce() -> Failure,
) -> Failure {
    if versions.is_empty() {
        return otherwise();
    }
    Failure::new(
        Reason::Malformed,
        Why::Unsupported {
            header: header.to_owned(),
            versions,
        },
    )
}
