//! A request's stamps, in contract order (docs/keys.md), and what the
//! metrics and the access log need to know of them: which keys were
//! missing and why, which were hashed, whether the events rule drops it.

use crate::affinity::{self, Affinity};
use crate::config::Source;
use crate::dedupe::MAX_DEDUPE_KEY;
use crate::key::{self, BodyState, KeySource, Missing};
use crate::lanes::{self, Lane, MAX_LANE_KEY};
use crate::stamps;
use crate::verify::Reason;
use std::borrow::Cow;

use super::{offered, Body};

/// An event type longer than this is stamped as its hash (as a lane key).
pub const MAX_EVENT_TYPE: usize = 128;

pub use crate::stamps::{Stamp, Value};

/// The stamps for one request, and what the metrics need to know. Names
/// and values borrow from the config and the request where they can: a
/// stamp is copied only when it is built (the idempotency key, a lane id)
/// or percent-encoded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stamped<'a> {
    /// The stamp headers, in contract order.
    pub headers: Vec<Stamp<'a>>,
    /// The source has dedupe but the request had no key: why.
    pub dedupe_key_missing: Option<Missing>,
    /// Keyed lanes whose key was missing (keyless instead): sink index, why.
    pub lane_keys_missing: Vec<(u16, Missing)>,
    /// The source reads the body, and it was over max_json_bytes.
    pub body_over_limit: bool,
    /// What the keys found the body to be.
    pub body: BodyState,
    /// The dedupe key was over its limit and is stamped as its hash.
    pub dedupe_key_hashed: bool,
    /// The sinks whose lane key was over its limit and is stamped as its
    /// hash.
    pub lane_keys_hashed: Sinks,
    /// The sinks whose group was longer than their broker takes and is
    /// stamped as its hash (`lanes::group`).
    pub lane_groups_hashed: Sinks,
    /// The source has an event type but the request had none: why.
    pub event_type_missing: Option<Missing>,
    /// Room for a text a stamp builds (the worker's spare: `stamps::room`),
    /// empty; given back with the stamps (`stamps::recycle`).
    pub text: String,
    /// The event type the source's `events` rule drops (after the 128-byte
    /// rule, before its encoding): the request is answered 200 by the
    /// filter, never forwarded (a streamed one, once its signature
    /// verifies).
    pub dropped: Option<Cow<'a, [u8]>>,
}

impl<'a> Stamped<'a> {
    /// The stamps, and after them the seal's fields (none without a seal):
    /// every stamp is in the stamp namespace, no seal field is. Looked for
    /// from the end, where the seal's few fields are: a request without a
    /// seal costs one name's look, not each stamp's.
    pub fn split_seal(&self) -> (&[Stamp<'a>], &[Stamp<'a>]) {
        let at = self
            .headers
            .iter()
            .rposition(|(n, _)| n.starts_with(stamps::PREFIX))
            .map_or(0, |last| last + 1);
        self.headers.split_at(at)
    }

    /// Marks a streamed request's verified stamp `stream`: its signature is
    /// checked as its body passes, and its completion is the verdict.
    pub fn streamed(&mut self) {
        if let Some((_, v)) = self
            .headers
            .iter_mut()
            .find(|(n, _)| *n == stamps::VERIFIED)
        {
            *v = Value::from("stream");
        }
    }

    /// Why a stamped request lacks something, for the access log: the
    /// signature's failure in flag mode, the dedupe key's and each keyless
    /// lane's reason, each hashed group; `dedupe=absent lane-1=not_json`.
    /// Empty where nothing is missing. Names and bounded reasons only,
    /// never a key or a body byte.
    pub fn why(&self, unverified: Option<Reason>) -> Why {
        let mut out = Why::default();
        if let Some(r) = unverified {
            out.whole(signature_item(r));
        }
        if let Some(m) = self.event_type_missing {
            out.whole(missing_item!("event-type=", m));
        }
        if let Some(m) = self.dedupe_key_missing {
            out.whole(missing_item!("dedupe=", m));
        }
        for (sink, m) in &self.lane_keys_missing {
            out.item(&["lane-", &sink.to_string(), "=", m.as_str()]);
        }
        for sink in self.lane_groups_hashed.iter() {
            out.item(&["lane-", &sink.to_string(), "-group=hashed"]);
        }
        out
    }
}

/// `<prefix><reason>` of a missing key, whole: a request's usual reason
/// is one such item, which `Why` then holds with no copy.
macro_rules! missing_item {
    ($prefix:literal, $m:expr) => {
        match $m {
            Missing::Absent => concat!($prefix, "absent"),
            Missing::Empty => concat!($prefix, "empty"),
            Missing::WrongType => concat!($prefix, "wrong_type"),
            Missing::NotJson => concat!($prefix, "not_json"),
            Missing::NotForm => concat!($prefix, "not_form"),
            Missing::OverLimit => concat!($prefix, "over_limit"),
            Missing::Unverified => concat!($prefix, "unverified"),
        }
    };
}
use missing_item;

/// `signature=<reason>`, whole.
fn signature_item(r: Reason) -> &'static str {
    match r {
        Reason::Missing => "signature=missing",
        Reason::Malformed => "signature=malformed",
        Reason::Mismatch => "signature=mismatch",
        Reason::Expired => "signature=expired",
        Reason::OverLimit => "signature=too_large",
    }
}

/// A set of sinks by index (a configuration has at most 64): a vector's
/// worth of answer with no allocation, and none to free on every request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sinks(u64);

const _: () = assert!(crate::config::bounds::MAX_SINKS <= 64);

impl Sinks {
    pub fn insert(&mut self, sink: u16) {
        self.0 |= 1u64.checked_shl(u32::from(sink)).unwrap_or(0);
    }

    pub fn contains(&self, sink: u16) -> bool {
        self.0 & 1u64.checked_shl(u32::from(sink)).unwrap_or(0) != 0
    }

    /// The sinks, by index.
    pub fn iter(self) -> impl Iterator<Item = u16> {
        let mut left = self.0;
        std::iter::from_fn(move || {
            let sink = u16::try_from(left.trailing_zeros())
                .ok()
                .filter(|&s| s < 64)?;
            left &= left - 1;
            Some(sink)
        })
    }
}

/// The access log's reason (`Stamped::why`), on the stack while it fits,
/// as a request's usual one or two items do: set on every request that
/// lacks a key, it costs no allocation there.
pub struct Why {
    /// The reason while it is one whole item (`whole`), not copied.
    one: &'static str,
    short: [u8; 64],
    len: usize,
    /// The whole reason, once it outgrows `short`.
    long: String,
}

impl Default for Why {
    fn default() -> Self {
        Why {
            one: "",
            short: [0; 64],
            len: 0,
            long: String::new(),
        }
    }
}

impl Why {
    /// Appends a whole item: the first is held as it is.
    fn whole(&mut self, item: &'static str) {
        if self.is_empty() {
            self.one = item;
        } else {
            self.item(&[item]);
        }
    }

    /// Appends an item (its parts, concatenated), after a space.
    fn item(&mut self, parts: &[&str]) {
        let first = self.is_empty();
        // A whole item held so far goes first in the copy.
        let one = std::mem::take(&mut self.one);
        self.push(one);
        if !first {
            self.push(" ");
        }
        for p in parts {
            self.push(p);
        }
    }

    fn push(&mut self, s: &str) {
        let end = self.len + s.len();
        if self.long.is_empty() && end <= self.short.len() {
            self.short[self.len..end].copy_from_slice(s.as_bytes());
            self.len = end;
        } else {
            if self.long.is_empty() {
                self.long.push_str(short_text(&self.short, self.len));
            }
            self.long.push_str(s);
        }
    }

    pub fn as_str(&self) -> &str {
        if !self.one.is_empty() {
            self.one
        } else if self.long.is_empty() {
            short_text(&self.short, self.len)
        } else {
            &self.long
        }
    }

    pub fn is_empty(&self) -> bool {
        self.as_str().is_empty()
    }
}

/// A `Why`'s text on the stack, its first `len` bytes.
fn short_text(short: &[u8; 64], len: usize) -> &str {
    // SAFETY: `Why::push` copies in whole `&str`s, one after another, and
    // moves `len` past each: the bytes up to `len` are UTF-8.
    unsafe { std::str::from_utf8_unchecked(&short[..len]) }
}

impl std::fmt::Debug for Why {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.as_str().fmt(f)
    }
}

impl PartialEq<&str> for Why {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// What one request's stamps are made from: its source and tenant, what
/// its keys were offered, and whether its signature verified (`None`: the
/// source does not verify).
struct Making<'a, 'v> {
    src: &'a Source,
    tenant: &'a str,
    values: &'v key::Values<'v, 'a>,
    verified: Option<bool>,
}

impl<'a> Making<'a, '_> {
    /// A forged hook (flag mode): none of its keys is trusted.
    fn unverified(&self) -> bool {
        self.verified == Some(false)
    }

    fn lookup(&self, k: &KeySource) -> Option<Cow<'a, [u8]>> {
        key::eval(k, self.values)
    }
}

/// Computes the stamps of a request routed to `src` for `tenant`, from the
/// values of its key headers (see `header_keys`), its body, and for a
/// source with `verify` whether its signature verified: an unverified
/// request (flag mode) never claims a dedupe key.
pub fn stamp<'a>(
    src: &'a Source,
    tenant: &'a str,
    header_keys: &[Option<&'a [u8]>],
    body: Body<'a>,
    body_hash: Option<[u8; 32]>,
    verified: Option<bool>,
) -> Stamped<'a> {
    // Source, tenant, verified, event type, the three of dedupe and the
    // affinity: a request's stamps never grow the vector.
    let (headers, text) = stamps::room(8 + 3 * src.lanes.len());
    let mut out = Stamped {
        headers,
        text,
        ..Stamped::default()
    };
    let offered = offered(src, header_keys, body, body_hash);
    out.body = offered.state;
    out.body_over_limit = offered.state == BodyState::OverLimit;
    let values = offered.values();
    let m = Making {
        src,
        tenant,
        values: &values,
        verified,
    };
    let h = &mut out.headers;
    // A source id and a tenant are stamped as they are: their characters
    // (`names`) are none the encoding changes.
    h.push((stamps::SOURCE, Value::from(src.id.as_str())));
    h.push((stamps::TENANT, Value::from(tenant)));
    if let Some(v) = verified {
        h.push((
            stamps::VERIFIED,
            Value::from(if v { "true" } else { "false" }),
        ));
    }
    event_type(&m, &mut out);
    let dedupe_key = dedupe(&m, &mut out);
    let mut affinity = None;
    for lane in &src.lanes {
        let keyed = lane_stamps(&m, lane, &mut out);
        // A node-local lane: the affinity is its lane's.
        if src.affinity == Some(Affinity::Lane(lane.sink)) {
            let id = keyed.unwrap_or_else(|| lanes::lane_id(lane.sink, &src.id, None));
            affinity = Some(affinity::lane_hex(tenant, &id));
        }
    }
    if let Some(a) = src.affinity {
        let id = match (a, affinity) {
            (Affinity::Lane(_), Some(id)) => id,
            (Affinity::Dedupe, _) => affinity::hex(tenant, &src.id, dedupe_key.as_deref()),
            _ => affinity::hex(tenant, &src.id, None),
        };
        out.headers.push((stamps::AFFINITY, Value::Id(id)));
    }
    out
}

/// What the event is (after the 128-byte rule), and whether the events
/// rule drops it; a forged one's (flag mode) is not trusted.
fn event_type<'a>(m: &Making<'a, '_>, out: &mut Stamped<'a>) {
    let Some(et) = &m.src.event_type else {
        return;
    };
    let found = m.lookup(et).map(|t| key::cap(t, MAX_EVENT_TYPE));
    match found.filter(|_| !m.unverified()) {
        Some(t) => {
            let encoded = stamps::encode_key(&t);
            if m.src.events.as_ref().is_some_and(|e| e.drops(&t)) {
                out.dropped = Some(t);
            }
            out.headers.push((stamps::EVENT_TYPE, encoded.into()));
        }
        None if m.unverified() => out.event_type_missing = Some(Missing::Unverified),
        None => out.event_type_missing = Some(key::why(et, m.values)),
    }
}

/// The dedupe stamps (key, ttl, idempotency key); the stamped key, which a
/// dedupe affinity hashes. A forged hook (flag mode) claims no dedupe key:
/// counted as unverified.
fn dedupe<'a>(m: &Making<'a, '_>, out: &mut Stamped<'a>) -> Option<Cow<'a, [u8]>> {
    let d = m.src.dedupe.as_ref()?;
    if m.unverified() {
        out.dedupe_key_missing = Some(Missing::Unverified);
        return None;
    }
    let Some(raw) = m.lookup(&d.key) else {
        out.dedupe_key_missing = Some(key::why(&d.key, m.values));
        return None;
    };
    out.dedupe_key_hashed = raw.len() > MAX_DEDUPE_KEY;
    let k = key::cap(raw, MAX_DEDUPE_KEY);
    let key = stamps::encode_key(&k);
    // `<tenant>:<source_id>:<key>`, percent-encoded: the encoding is byte
    // by byte, so for the source's own tenant (the one the route lends,
    // told by its address, not its text) it is the prefix made at load
    // and the key's own encoding.
    let idem = if std::ptr::eq(m.tenant, m.src.tenant.as_str()) {
        let mut idem = std::mem::take(&mut out.text);
        idem.reserve(m.src.idempotency_prefix.len() + key.len());
        idem.push_str(&m.src.idempotency_prefix);
        idem.push_str(&key);
        idem
    } else {
        stamps::encode_joined(&[m.tenant.as_bytes(), m.src.id.as_bytes(), &k])
    };
    let h = &mut out.headers;
    h.push((stamps::DEDUPE_KEY, key.into()));
    h.push((stamps::DEDUPE_TTL_MS, Value::from(d.ttl_ms.as_str())));
    h.push((stamps::IDEMPOTENCY_KEY, idem.into()));
    Some(k)
}

/// One lane's stamps: its id, its key where it has one, its group; a keyed
/// lane's raw id, which a lane affinity hashes (`None`: the keyless lane).
/// A forged hook (flag mode) never enters a customer's lane: every lane of
/// an unverified request is keyless.
fn lane_stamps<'a>(m: &Making<'a, '_>, lane: &'a Lane, out: &mut Stamped<'a>) -> Option<[u8; 16]> {
    let key = lane.key.as_ref().filter(|_| !m.unverified());
    let k = key.and_then(|k| m.lookup(k)).map(|raw| {
        if raw.len() > MAX_LANE_KEY {
            out.lane_keys_hashed.insert(lane.sink);
        }
        key::cap(raw, MAX_LANE_KEY)
    });
    let [id_name, key_name, group_name] = &lane.names;
    let Some(k) = k else {
        keyless_lane(m, lane, out);
        return None;
    };
    let raw_id = lane.keyed_id(&m.src.id, &k);
    let encoded = stamps::encode_key(&k);
    // A keyed lane's group is its stamped key (behind its tenant, with
    // `group_scope` tenant), where the sink's broker takes it.
    let (group, hashed) = lanes::keyed_group(
        lane.group_scope,
        m.tenant,
        &k,
        encoded.clone(),
        lane.group_max,
    );
    if hashed {
        out.lane_groups_hashed.insert(lane.sink);
    }
    let h = &mut out.headers;
    h.push((id_name, Value::Id(stamps::Hex::of(&raw_id))));
    h.push((key_name, encoded.into()));
    h.push((group_name, group.into()));
    Some(raw_id)
}

/// The stamps of a lane whose request has no key for it (or it takes
/// none): the source's keyless lane.
fn keyless_lane<'a>(m: &Making<'a, '_>, lane: &'a Lane, out: &mut Stamped<'a>) {
    if let Some(ks) = &lane.key {
        let why = if m.unverified() {
            Missing::Unverified
        } else {
            key::why(ks, m.values)
        };
        out.lane_keys_missing.push((lane.sink, why));
    }
    let [id_name, _, group_name] = &lane.names;
    let group = lanes::keyless_group(m.tenant, &m.src.id);
    let encoded = Cow::Owned(stamps::encode_string(group));
    let (group, hashed) = lanes::group(encoded, None, lane.group_max);
    if hashed {
        out.lane_groups_hashed.insert(lane.sink);
    }
    // No key stamp: the group says keyless, and an empty value is one an
    // Envoy dynamic module cannot set (docs/keys.md).
    out.headers.push((id_name, Value::Id(lane.keyless_id)));
    out.headers.push((group_name, group.into()));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sinks_are_a_set_in_order() {
        let mut s = Sinks::default();
        assert_eq!(s.iter().count(), 0);
        for sink in [63, 0, 5, 5, 40] {
            s.insert(sink);
        }
        assert_eq!(s.iter().collect::<Vec<_>>(), [0, 5, 40, 63]);
        assert!(s.contains(40) && !s.contains(41));
    }

    #[test]
    fn a_whole_item_is_held_then_copied_before_the_next() {
        let mut w = Why::default();
        w.whole(missing_item!("dedupe=", Missing::NotJson));
        assert_eq!(w, "dedupe=not_json");
        w.whole(signature_item(Reason::OverLimit));
        assert_eq!(w, "dedupe=not_json signature=too_large");
        w.item(&["lane-", "3", "=absent"]);
        assert_eq!(w, "dedupe=not_json signature=too_large lane-3=absent");
        for m in Missing::ALL {
            assert_eq!(
                missing_item!("event-type=", m),
                format!("event-type={}", m.as_str())
            );
        }
        for r in Reason::ALL {
            assert_eq!(signature_item(r), format!("signature={}", r.as_str()));
        }
    }

    #[test]
    fn why_moves_to_the_heap_past_its_room_and_keeps_every_item() {
        let mut w = Why::default();
        assert!(w.is_empty());
        w.item(&["dedupe=", "absent"]);
        assert_eq!(w, "dedupe=absent");
        // 13 + 50 = 63 bytes, then 65: across the 64-byte room.
        w.item(&["x".repeat(49).as_str()]);
        assert_eq!(w.as_str().len(), 63);
        w.item(&["é"]);
        assert_eq!(w.as_str(), format!("dedupe=absent {} é", "x".repeat(49)));
        w.item(&["lane-", "7", "=absent"]);
        assert!(w.as_str().ends_with(" é lane-7=absent"));
    }

    #[test]
    fn the_seal_splits_off_after_the_last_stamp() {
        let stamp = |n: &'static str| (n, Value::from("v"));
        let mut s = Stamped::default();
        assert_eq!(s.split_seal(), (&[][..], &[][..]));
        s.headers = vec![stamp("x-hookstamp-source"), stamp("x-hookstamp-lane-0")];
        assert_eq!(s.split_seal(), (&s.headers[..], &[][..]));
        for fields in [
            &[crate::seal::SIGNATURE_INPUT, crate::seal::SIGNATURE][..],
            &[
                crate::seal::CONTENT_DIGEST,
                crate::seal::SIGNATURE_INPUT,
                crate::seal::SIGNATURE,
            ],
        ] {
            s.headers.truncate(2);
            s.headers.extend(fields.iter().map(|&n| stamp(n)));
            assert_eq!(s.split_seal(), (&s.headers[..2], &s.headers[2..]));
        }
    }
}
