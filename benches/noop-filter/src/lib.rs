//! An empty proxy-wasm filter: every callback answers Continue (the SDK's
//! defaults). Built with hookstamp's exports, it is the floor that any
//! filter on this SDK pays in Envoy's V8, whatever it does. Its plugin
//! configuration says what else it does per request, one host call each,
//! as hookstamp makes them (a word or a line each):
//! - `N`: adds N request headers (`x-noop-header-<i>`), as hookstamp adds
//!   its stamps: what those calls cost any filter;
//! - `name: value`: adds that request header;
//! - `read`: reads the request's header map, as hookstamp reads every
//!   request's (and drops it unread: reading it is hookstamp's own work),
//!   making none of the other calls where it finds no header;
//! - `count NAME`: defines a counter, incremented once a request;
//! - `why VALUE`: sets the property hookstamp sets for the access log;
//! - `tick`: sets a tick period, as hookstamp does: what Envoy keeps for a
//!   configuration that ticks (tests/e2e/test_reload.py measures it);
//! - `counts at tick` (the .wasm only): the counters' increments kept and
//!   handed to Envoy at a 50 ms tick, one call a counter, as hookstamp's
//!   .wasm hands its counts over (src/filter/counts.rs);
//! - `ed25519 N` (`ed25519 N wrong`: a signature that fails): verifies one
//!   Ed25519 signature over N bytes a request,
//!   with the crate, features and opt-levels hookstamp's builds use, the key
//!   decompressed at load as hookstamp's is: what the check itself costs in
//!   the host's code. A verification that fails aborts (the bench sees it).
//! - `hand`: makes (c)'s eight stamps by hand from the request's two
//!   headers (`hand`, below) and adds them, in place of the `N` and
//!   `name: value` adds: what (c)'s own work costs with nothing of
//!   hookstamp's configuration, checks or generality.
//!
//! The bench's (r) makes (c)'s calls: what the calls alone cost, beside
//! hookstamp's own work in the VM. Built with the feature `crash`
//! (target/crash.wasm, for the tests only), it aborts on a request with an
//! `x-crash` header: a VM that fails, to test Envoy's failure policies
//! with.
//!
//! Built natively (target/libnoop.so), it is the same floor for Envoy's
//! dynamic modules, configured by the same lines (`module.rs`).

#[cfg(not(target_arch = "wasm32"))]
mod module;

// hookstamp's own SHA-256 (ring's natively; in the .wasm, its compression
// written for V8), its reading of the proxy-wasm header map and its
// stamps' names, encoding rule and hex: `hand` pays for them what
// hookstamp pays.
#[allow(dead_code)]
#[path = "../../../src/pairs.rs"]
mod pairs;
#[allow(dead_code)]
#[path = "../../../src/sha256/mod.rs"]
mod sha256;
#[allow(dead_code)]
#[path = "../../../src/stamps.rs"]
mod stamps;

/// A value as long as a lane id, for the `N` headers.
const VALUE: &str = "934b1a67e16c9f5bbe58f8aec60bcfd8";

/// What a request does, as its configuration says (above); both builds
/// read it with `plan`, and each makes the calls its own way.
#[derive(Default)]
struct Plan {
    read: bool,
    adds: Vec<(String, String)>,
    counters: Vec<String>,
    why: Option<String>,
    tick: bool,
    counts_at_tick: bool,
    ed25519: Option<Ed25519>,
    hand: bool,
}

/// (c)'s lane id's message before its key: hookstamp's lane domain, sink 0,
/// the source id's length and the id `github`, and the mark of a keyed
/// lane (src/lanes.rs).
const HAND_LANE: &[u8] = b"hookstamp.lane.v1\0\0\0\0\x06github\x01";

/// The room `hand` builds the idempotency key in.
struct Room {
    idempotency: [u8; 96],
}

impl Default for Room {
    fn default() -> Self {
        Room {
            idempotency: [0; 96],
        }
    }
}

/// (c)'s stamps made by hand from its dedupe key (`x-github-delivery`) and
/// its lane key (`x-github-hook-id`), each as `header` finds it, in the
/// contract's order: the github preset's source, tenant and TTL as
/// constants, each key checked to need no encoding (hookstamp's rule,
/// `stamps::encode`), the idempotency key joined, the lane id hashed and
/// made hex (`stamps::Hex`). `None` where a key is missing, would need
/// encoding or is too long for `room` (the bench sends none of those).
fn hand<'a>(
    header: impl Fn(&str) -> Option<&'a [u8]>,
    room: &'a mut Room,
    lane: &'a mut stamps::Hex,
) -> Option<[(&'static str, &'a [u8]); 8]> {
    const PREFIX: &[u8] = b"default:github:";
    let (delivery, hook) = (header("x-github-delivery")?, header("x-github-hook-id")?);
    let as_is = |k: &[u8]| matches!(stamps::encode(k), std::borrow::Cow::Borrowed(_));
    let joined = PREFIX.len() + delivery.len();
    if !as_is(delivery) || !as_is(hook) || joined > room.idempotency.len() {
        return None;
    }
    room.idempotency[..PREFIX.len()].copy_from_slice(PREFIX);
    room.idempotency[PREFIX.len()..joined].copy_from_slice(delivery);
    let mut h = sha256::Sha256::new();
    h.update(HAND_LANE);
    h.update(hook);
    let mut id = [0; 16];
    id.copy_from_slice(&h.finish()[..16]);
    *lane = stamps::Hex::of(&id);
    Some([
        (stamps::SOURCE, b"github"),
        (stamps::TENANT, b"default"),
        (stamps::DEDUPE_KEY, delivery),
        (stamps::DEDUPE_TTL_MS, b"259200000"),
        (stamps::IDEMPOTENCY_KEY, &room.idempotency[..joined]),
        ("x-hookstamp-lane-0", lane.as_str().as_bytes()),
        ("x-hookstamp-lane-0-key", hook),
        ("x-hookstamp-lane-0-group", hook),
    ])
}

/// A signature to verify a request, made at load.
struct Ed25519 {
    key: ed25519_dalek::VerifyingKey,
    signature: ed25519_dalek::Signature,
    message: Vec<u8>,
}

impl Ed25519 {
    /// `wrong`: the signature made over another message (the tests' check
    /// that the verification runs: every request aborts).
    fn new(n: usize, wrong: bool) -> Ed25519 {
        use ed25519_dalek::Signer as _;
        let signing = ed25519_dalek::SigningKey::from_bytes(&[7; 32]);
        let mut message = vec![b'x'; n];
        let signature = signing.sign(&message);
        if wrong {
            message.push(b'x');
        }
        Ed25519 {
            key: signing.verifying_key(),
            signature,
            message,
        }
    }

    /// As hookstamp checks a streamed body: the verifier fed the message.
    fn verify(&self) {
        let ok = self.key.verify_stream(&self.signature).is_ok_and(|mut v| {
            v.update(std::hint::black_box(&self.message));
            v.finalize_and_verify().is_ok()
        });
        if !ok {
            std::process::abort();
        }
    }
}

fn plan(text: &str) -> Plan {
    let mut p = Plan::default();
    for line in text.lines().map(str::trim) {
        if line == "counts at tick" {
            p.counts_at_tick = true;
            continue;
        }
        if let Some((name, value)) = line.split_once(": ") {
            p.adds.push((name.to_owned(), value.to_owned()));
            continue;
        }
        let mut words = line.split_whitespace();
        while let Some(w) = words.next() {
            match w {
                "read" => p.read = true,
                "hand" => p.hand = true,
                "tick" => p.tick = true,
                "ed25519" => {
                    let n = words.next().and_then(|n| n.parse().ok()).unwrap_or(0);
                    let wrong = words.next() == Some("wrong");
                    p.ed25519 = Some(Ed25519::new(n, wrong));
                }
                "count" => p
                    .counters
                    .push(words.next().unwrap_or("noop_counter").to_owned()),
                "why" => p.why = Some(words.by_ref().collect::<Vec<_>>().join(" ")),
                n => {
                    let n: usize = n.parse().unwrap_or(0);
                    p.adds
                        .extend((0..n).map(|i| (format!("x-noop-header-{i}"), VALUE.to_owned())));
                }
            }
        }
    }
    p
}

#[cfg(target_arch = "wasm32")]
mod filter {
    use proxy_wasm::hostcalls;
    use proxy_wasm::traits::{Context, HttpContext, RootContext};
    use proxy_wasm::types::{Action, BufferType, ContextType, MapType, MetricType};
    use std::cell::Cell;
    use std::rc::Rc;

    extern "C" {
        // The raw calls, as hookstamp makes them (the SDK's own wrappers
        // would copy each header and join the path).
        fn proxy_get_header_map_pairs(map: u32, data: *mut *mut u8, size: *mut usize) -> u32;
        fn proxy_set_property(
            path: *const u8,
            path_size: usize,
            value: *const u8,
            size: usize,
        ) -> u32;
    }

    proxy_wasm::main! {{
        proxy_wasm::set_root_context(|_| -> Box<dyn RootContext> {
            Box::new(Root { calls: Rc::new(Calls::default()) })
        });
    }}

    /// The configuration's plan, its counters defined.
    #[derive(Default)]
    struct Calls {
        plan: super::Plan,
        counters: Vec<u32>,
        /// Requests counted since the last tick (`counts at tick`).
        pending: Cell<u64>,
    }

    /// The request's header map as the host serialises it; `None` where
    /// it has none.
    fn header_map() -> Option<Vec<u8>> {
        let (mut data, mut size) = (std::ptr::null_mut(), 0);
        // SAFETY: the host writes the two out-parameters; a buffer it hands
        // over is the SDK allocator's boxed slice of `size` bytes.
        unsafe {
            proxy_get_header_map_pairs(MapType::HttpRequestHeaders as u32, &mut data, &mut size);
            (!data.is_null()).then(|| Vec::from_raw_parts(data, size, size))
        }
    }

    /// Reads the request's header map and drops it; whether it had any.
    fn read_headers() -> bool {
        header_map().is_some_and(|m| m.len() > 4)
    }

    /// `hand`: (c)'s two keys found in the header map as hookstamp reads
    /// it, its stamps made by hand and added; whether they were.
    fn add_by_hand() -> bool {
        let Some(raw) = header_map() else {
            return false;
        };
        let Some(map) = super::pairs::parse(&raw) else {
            return false;
        };
        let (mut room, mut lane) = (super::Room::default(), super::stamps::Hex::of(&[0; 16]));
        let found = |n: &str| super::pairs::first_header(&map, n);
        let Some(stamps) = super::hand(found, &mut room, &mut lane) else {
            return false;
        };
        for (name, value) in stamps {
            let _ = hostcalls::add_map_value_bytes(MapType::HttpRequestHeaders, name, value);
        }
        true
    }

    struct Root {
        calls: Rc<Calls>,
    }

    impl Context for Root {}

    impl RootContext for Root {
        fn on_configure(&mut self, _size: usize) -> bool {
            let raw = hostcalls::get_buffer(BufferType::PluginConfiguration, 0, usize::MAX);
            let text = match raw {
                Ok(Some(b)) => String::from_utf8_lossy(&b).into_owned(),
                _ => String::new(),
            };
            let plan = super::plan(&text);
            if plan.counts_at_tick {
                let _ = hostcalls::set_tick_period(std::time::Duration::from_millis(50));
            } else if plan.tick {
                let _ = hostcalls::set_tick_period(std::time::Duration::from_millis(100));
            }
            let counters = plan
                .counters
                .iter()
                .filter_map(|name| hostcalls::define_metric(MetricType::Counter, name).ok())
                .collect();
            self.calls = Rc::new(Calls {
                plan,
                counters,
                pending: Cell::new(0),
            });
            true
        }

        fn on_tick(&mut self) {
            let n = self.calls.pending.take();
            if n > 0 {
                for id in self.calls.counters.iter() {
                    let _ = hostcalls::increment_metric(*id, n as i64);
                }
            }
        }

        fn create_http_context(&self, _context_id: u32) -> Option<Box<dyn HttpContext>> {
            Some(Box::new(Pass {
                calls: self.calls.clone(),
            }))
        }

        fn get_type(&self) -> Option<ContextType> {
            Some(ContextType::HttpContext)
        }
    }

    struct Pass {
        calls: Rc<Calls>,
    }

    impl Context for Pass {}

    impl HttpContext for Pass {
        fn on_http_request_headers(&mut self, _num_headers: usize, _end: bool) -> Action {
            #[cfg(feature = "crash")]
            if let Ok(Some(_)) = hostcalls::get_map_value(MapType::HttpRequestHeaders, "x-crash") {
                std::process::abort();
            }
            let (c, p) = (&self.calls, &self.calls.plan);
            // A read that finds no headers makes no other call: the bench's
            // test sees the others, so it sees the read taken.
            if p.read && !read_headers() || p.hand && !add_by_hand() {
                return Action::Continue;
            }
            if let Some(ed) = &p.ed25519 {
                ed.verify();
            }
            for (name, value) in p.adds.iter() {
                let _ = hostcalls::add_map_value(MapType::HttpRequestHeaders, name, value);
            }
            if p.counts_at_tick {
                c.pending.set(c.pending.get() + 1);
            } else {
                for id in c.counters.iter() {
                    let _ = hostcalls::increment_metric(*id, 1);
                }
            }
            if let Some(why) = &p.why {
                let path = "hookstamp_why";
                // SAFETY: the host reads both within their lengths.
                unsafe { proxy_set_property(path.as_ptr(), path.len(), why.as_ptr(), why.len()) };
            }
            Action::Continue
        }
    }
}
