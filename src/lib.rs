//! hookstamp: webhook dedupe keys and ordering lanes, stamped in the proxy.
//!
//! Everything but `filter` is plain Rust with no proxy-wasm in it, so the
//! native harness (`hookstamp check`, `stamp`, `explain`, `batch`) and the
//! tests run exactly the code the filter runs. ARCHITECTURE.md maps the
//! layers.

pub mod affinity;
pub mod budget;
pub mod config;
pub mod decide;
pub mod dedupe;
pub mod events;
#[cfg(not(target_arch = "wasm32"))]
pub mod explain;
pub mod form;
pub mod handshake;
pub mod host;
pub mod json;
pub mod key;
pub mod lanes;
pub mod lifecycle;
pub mod metrics;
pub mod names;
pub mod pairs;
pub mod path;
pub mod providers;
pub mod reply;
pub mod route;
pub mod seal;
pub mod stamps;
pub mod strip;
pub mod verify;
#[cfg(not(target_arch = "wasm32"))]
pub mod wire;

pub mod filter;

// The Envoy dynamic module (target/libhookstamp.so): `make dynamic-module`.
#[cfg(all(feature = "dynamic-module", not(target_arch = "wasm32")))]
mod dynmod;
