//! Checks a source's `affinity` and resolves its default.

use super::diag::{Diags, Scope};
use super::reads::Ordered;
use crate::affinity::Affinity;
use crate::lanes::Lane;
use serde_json::Value;

const FORMS: &str = "\"dedupe\", \"source\" or {\"sink\": index of an ordered sink}";

/// The source's affinity: `None` when the top-level switch is off (and
/// then a per-source `affinity` is an error).
pub fn check(
    v: Option<&Value>,
    on: bool,
    lanes: &[Lane],
    ordered: &Ordered,
    has_dedupe: bool,
    scope: &Scope,
    d: &mut Diags,
) -> Option<Affinity> {
    let Some(v) = v else {
        return on.then(|| default(lanes, has_dedupe));
    };
    if !on {
        d.push(
            scope,
            "affinity_off",
            "affinity needs the top-level \"affinity\": true",
        );
        return None;
    }
    match v {
        Value::String(s) if s == "dedupe" => {
            if !has_dedupe {
                d.push(
                    scope,
                    "affinity_needs_dedupe",
                    "affinity \"dedupe\" needs a dedupe rule on the source",
                );
            }
            Some(Affinity::Dedupe)
        }
        Value::String(s) if s == "source" => Some(Affinity::Source),
        Value::Object(o) if o.len() == 1 && o.get("sink").is_some_and(Value::is_u64) => {
            let n = o.get("sink").and_then(Value::as_u64).unwrap_or(0);
            let index = usize::try_from(n).unwrap_or(usize::MAX);
            if index >= ordered.count {
                d.push(
                    scope,
                    "sink_out_of_range",
                    format!(
                        "affinity sink {n} is out of range: the source has {} sink(s)",
                        ordered.count
                    ),
                );
            } else if !ordered.ordered.contains(&index) {
                d.push(
                    scope,
                    "sink_not_ordered",
                    format!("affinity sink {n} is not ordered: only an ordered sink has a lane"),
                );
            }
            u16::try_from(index).ok().map(Affinity::Lane)
        }
        other => {
            d.push(
                scope,
                "bad_affinity",
                format!("affinity must be {FORMS}, got {other}"),
            );
            None
        }
    }
}

/// The first ordered sink with an ordering key, else the first ordered
/// sink; for a source without ordered sinks, its dedupe key, else the
/// source.
fn default(lanes: &[Lane], has_dedupe: bool) -> Affinity {
    let keyed = lanes.iter().find(|l| l.key.is_some());
    match keyed.or(lanes.first()) {
        Some(l) => Affinity::Lane(l.sink),
        None if has_dedupe => Affinity::Dedupe,
        None => Affinity::Source,
    }
}
