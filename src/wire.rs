//! The native harness's JSON form of a decision: what `hookstamp stamp`
//! and `batch` print, and what the case tables (natively and through
//! Envoy) compare.

use crate::decide::Outcome;
use serde_json::{json, Value};

/// `{"action":"forward","headers":[[n,v],..]}`, `{"action":"reject",
/// "status":404}` (any error status the filter answers),
/// `{"action":"answer","status":200,"body":B}` (a handshake answered, an
/// event dropped: nothing reaches the queue) or `{"action":"pass"}`.
pub fn outcome(o: &Outcome) -> Value {
    if let Outcome::Forward { stamped, .. } = o {
        let headers: Vec<[&str; 2]> = stamped
            .headers
            .iter()
            .map(|(n, v)| [*n, v.as_ref()])
            .collect();
        return json!({"action": "forward", "headers": headers});
    }
    match o.reply() {
        None => json!({"action": "pass"}),
        Some(r) if r.status < 400 => {
            json!({"action": "answer", "status": r.status, "body": r.body})
        }
        Some(r) => json!({"action": "reject", "status": r.status}),
    }
}
