//! The proxy-wasm adapter: `abi` (wasm32 only) is the ABI itself, its
//! imports behind the host traits and its exports, each a shim over
//! `contexts`, which keeps proxy-wasm's context ids and is generic over the
//! proxy, so the tests run it natively with the mock host.

pub mod contexts;
pub mod counts;

#[cfg(target_arch = "wasm32")]
mod abi;
