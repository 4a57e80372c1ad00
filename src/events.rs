//! Event types, and the rule that drops the ones a source does not want:
//! `{"accept": [...]}` keeps only the types it names, `{"drop": [...]}`
//! drops the ones it names. A pattern is a type, or a prefix ending in `*`
//! (`invoice.*`). A dropped event is answered 200 by the filter, after its
//! signature verified, and never reaches the queue; an event without a type
//! is always kept. What a preset's provider calls an event is its row's in
//! `providers`.

/// One pattern: an exact type, or a prefix (`invoice.*`, `*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern {
    text: String,
    prefix: bool,
}

impl Pattern {
    pub fn new(p: &str) -> Self {
        match p.strip_suffix('*') {
            Some(prefix) => Pattern {
                text: prefix.to_owned(),
                prefix: true,
            },
            None => Pattern {
                text: p.to_owned(),
                prefix: false,
            },
        }
    }

    pub fn matches(&self, event_type: &[u8]) -> bool {
        if self.prefix {
            event_type.starts_with(self.text.as_bytes())
        } else {
            event_type == self.text.as_bytes()
        }
    }
}

/// A source's rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Events {
    Accept(Vec<Pattern>),
    Drop(Vec<Pattern>),
}

impl Events {
    /// Whether an event of this type is dropped.
    pub fn drops(&self, event_type: &[u8]) -> bool {
        match self {
            Events::Accept(ps) => !ps.iter().any(|p| p.matches(event_type)),
            Events::Drop(ps) => ps.iter().any(|p| p.matches(event_type)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns() {
        let drop = Events::Drop(vec![Pattern::new("invoice.*"), Pattern::new("ping")]);
        assert!(drop.drops(b"invoice.paid") && drop.drops(b"ping"));
        assert!(!drop.drops(b"pings") && !drop.drops(b"customer.created"));
        let accept = Events::Accept(vec![Pattern::new("charge.*")]);
        assert!(!accept.drops(b"charge.succeeded") && accept.drops(b"invoice.paid"));
        assert!(!Events::Accept(vec![Pattern::new("*")]).drops(b"x"));
    }
}
