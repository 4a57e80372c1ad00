//! Configuration errors and warnings, structured: what each is about (its
//! scope), a stable code naming its kind, and the message. `config::load`
//! renders them as lines of text for the load log and the CLI;
//! `config::check_value` hands them over as they are, and the config error
//! table asserts their scopes and codes, so the sentences can improve
//! without breaking a test.

use std::fmt;

/// What a configuration error is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// The configuration as a whole, or a top-level field.
    Config,
    /// The stamp seal (`seal`).
    Seal,
    /// A source without a usable id, by its place in the list.
    SourceAt(usize),
    /// A source, by id.
    Source(String),
    /// A source's dedupe rule.
    Dedupe(String),
    /// A source's signature verification.
    Verify(String),
    /// One sink of a source: its index, and its type when it has one.
    Sink {
        source: String,
        index: usize,
        kind: Option<String>,
    },
}

/// A stable name for a kind of error or warning (`unknown_field`,
/// `bound`, `not_a_tenant`...): tests and tools match on it; the message
/// may change.
pub type Code = &'static str;

/// One configuration error or warning.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diag {
    pub scope: Scope,
    pub code: Code,
    pub message: String,
}

/// An error found below a scope, by a check that returns it (a key
/// expression, a bound); its caller gives it the scope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issue {
    pub code: Code,
    pub message: String,
}

impl Issue {
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Issue {
            code,
            message: message.into(),
        }
    }

    /// The same issue, its message behind `prefix: `.
    pub fn within(self, prefix: &str) -> Self {
        Issue {
            code: self.code,
            message: format!("{prefix}: {}", self.message),
        }
    }
}

/// Every error a check found below a scope (a key expression reports each
/// of its parts' problems, not only the first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issues(pub Vec<Issue>);

impl From<Issue> for Issues {
    fn from(i: Issue) -> Self {
        Issues(vec![i])
    }
}

impl fmt::Display for Issue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scope::Config => write!(f, "config"),
            Scope::Seal => write!(f, "seal"),
            Scope::SourceAt(i) => write!(f, "source #{i}"),
            Scope::Source(id) => write!(f, "source '{id}'"),
            Scope::Dedupe(id) => write!(f, "source '{id}' dedupe"),
            Scope::Verify(id) => write!(f, "source '{id}' verify"),
            Scope::Sink {
                source,
                index,
                kind: Some(k),
            } => write!(f, "source '{source}' sink {index} ({k})"),
            Scope::Sink {
                source,
                index,
                kind: None,
            } => write!(f, "source '{source}' sink {index}"),
        }
    }
}

impl fmt::Display for Diag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.scope, self.message)
    }
}

/// Collects every error of a check, each with its scope, and the
/// warnings of a configuration that loads.
#[derive(Debug, Default)]
pub struct Diags {
    errors: Vec<Diag>,
    warnings: Vec<Diag>,
}

impl Diags {
    pub fn push(&mut self, scope: &Scope, code: Code, message: impl Into<String>) {
        self.errors.push(Diag {
            scope: scope.clone(),
            code,
            message: message.into(),
        });
    }

    /// An error a check returned, in `scope`.
    pub fn issue(&mut self, scope: &Scope, issue: Issue) {
        self.push(scope, issue.code, issue.message);
    }

    pub fn warn(&mut self, scope: &Scope, code: Code, message: impl Into<String>) {
        self.warnings.push(Diag {
            scope: scope.clone(),
            code,
            message: message.into(),
        });
    }

    pub fn len(&self) -> usize {
        self.errors.len()
    }

    /// (errors, warnings)
    pub fn into_parts(self) -> (Vec<Diag>, Vec<Diag>) {
        (self.errors, self.warnings)
    }
}
