//! The panic barrier's own check: `HOOKSTAMP_PANIC_PROBE`, a list of hook
//! names (`filter_new,request_headers,...`) in Envoy's environment, makes
//! each named hook panic once, so that a test proves a panic answers its
//! stream 500 and Envoy goes on serving. Unset (as in any deployment), a
//! probe costs one relaxed load per hook.

use super::envoy::log;
use crate::host::Level;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};

/// The hooks still to panic; `None` when the variable is unset.
static ARMED: OnceLock<Option<Mutex<Vec<String>>>> = OnceLock::new();
/// Whether any hook is still armed: the hot path's only check.
static ANY: AtomicBool = AtomicBool::new(true);

fn armed() -> &'static Option<Mutex<Vec<String>>> {
    ARMED.get_or_init(|| {
        let hooks = std::env::var("HOOKSTAMP_PANIC_PROBE").ok()?;
        let hooks: Vec<String> = hooks.split(',').map(|h| h.trim().to_owned()).collect();
        log(
            Level::Warn,
            &format!("hookstamp: HOOKSTAMP_PANIC_PROBE arms a panic in {hooks:?}"),
        );
        Some(Mutex::new(hooks))
    })
}

/// Panics here once when `hook` is armed.
#[inline]
pub fn fire(hook: &str) {
    if ANY.load(Ordering::Relaxed) {
        fire_armed(hook);
    }
}

#[cold]
fn fire_armed(hook: &str) {
    let Some(hooks) = armed() else {
        ANY.store(false, Ordering::Relaxed);
        return;
    };
    let fired = {
        let mut h = hooks.lock().unwrap_or_else(PoisonError::into_inner);
        let at = h.iter().position(|n| n == hook);
        if let Some(at) = at {
            h.remove(at);
        }
        if h.is_empty() {
            ANY.store(false, Ordering::Relaxed);
        }
        at.is_some()
    };
    if fired {
        #[allow(clippy::panic)] // The probe's purpose.
        {
            panic!("HOOKSTAMP_PANIC_PROBE: a panic in {hook}, on purpose");
        }
    }
}

/// A panic's message goes to Envoy's log (not only the process's stderr).
pub fn log_panics() {
    std::panic::set_hook(Box::new(|info| {
        log(Level::Critical, &format!("hookstamp: {info}"));
    }));
}
