//! Configuration errors: what each is about (its scope), typed, and the
//! message; turned into one line of text only at the edge (a log line, the
//! CLI).

use std::fmt;

/// What a configuration error is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// The configuration as a whole, or a top-level field.
    Config,
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

/// One configuration error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diag {
    pub scope: Scope,
    pub message: String,
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scope::Config => write!(f, "config"),
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
    pub fn push(&mut self, scope: &Scope, message: impl Into<String>) {
        self.errors.push(Diag {
            scope: scope.clone(),
            message: message.into(),
        });
    }

    pub fn warn(&mut self, scope: &Scope, message: impl Into<String>) {
        self.warnings.push(Diag {
            scope: scope.clone(),
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
