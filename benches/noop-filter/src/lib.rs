//! An empty proxy-wasm filter: every callback answers Continue (the SDK's
//! defaults). Built with hookstamp's exports, it is the floor that any
//! filter on this SDK pays in Envoy's V8, whatever it does. With a plugin
//! configuration of `N`, it also adds N request headers per request, one
//! host call each, as hookstamp adds its stamps: what those calls cost any
//! filter. A configuration with the word `tick` in it also sets a tick
//! period, as hookstamp does: what Envoy keeps for a configuration that
//! ticks (tests/e2e/test_reload.py measures it). Built with the feature `crash` (target/crash.wasm, for the
//! tests only), it aborts on a request with an `x-crash` header: a VM that
//! fails, to test Envoy's failure policies with.
//!
//! Built natively (target/libnoop.so), it is the same floor for Envoy's
//! dynamic modules: a filter object per stream whose every hook answers
//! Continue, and with a filter configuration of `name: value` lines, those
//! request headers added per request through the ABI, one call each, as
//! hookstamp's module adds its stamps.

#[cfg(not(target_arch = "wasm32"))]
mod module;

#[cfg(target_arch = "wasm32")]
mod filter {
    use proxy_wasm::hostcalls;
    use proxy_wasm::traits::{Context, HttpContext, RootContext};
    use proxy_wasm::types::{Action, BufferType, ContextType, MapType};
    use std::rc::Rc;

    proxy_wasm::main! {{
        proxy_wasm::set_root_context(|_| -> Box<dyn RootContext> {
            Box::new(Root { names: Rc::new(Vec::new()) })
        });
    }}

    /// A value as long as a lane id.
    const VALUE: &str = "934b1a67e16c9f5bbe58f8aec60bcfd8";

    struct Root {
        names: Rc<Vec<String>>,
    }

    impl Context for Root {}

    impl RootContext for Root {
        fn on_configure(&mut self, _size: usize) -> bool {
            let raw = hostcalls::get_buffer(BufferType::PluginConfiguration, 0, usize::MAX);
            let text = match raw {
                Ok(Some(b)) => String::from_utf8_lossy(&b).into_owned(),
                _ => String::new(),
            };
            let n = text.trim().parse().unwrap_or(0);
            if text.contains("tick") {
                let _ = hostcalls::set_tick_period(std::time::Duration::from_millis(100));
            }
            self.names = Rc::new((0..n).map(|i| format!("x-noop-header-{i}")).collect());
            true
        }

        fn create_http_context(&self, _context_id: u32) -> Option<Box<dyn HttpContext>> {
            Some(Box::new(Pass {
                names: self.names.clone(),
            }))
        }

        fn get_type(&self) -> Option<ContextType> {
            Some(ContextType::HttpContext)
        }
    }

    struct Pass {
        names: Rc<Vec<String>>,
    }

    impl Context for Pass {}

    impl HttpContext for Pass {
        fn on_http_request_headers(&mut self, _num_headers: usize, _end: bool) -> Action {
            #[cfg(feature = "crash")]
            if let Ok(Some(_)) = hostcalls::get_map_value(MapType::HttpRequestHeaders, "x-crash") {
                std::process::abort();
            }
            for name in self.names.iter() {
                let _ = hostcalls::add_map_value(MapType::HttpRequestHeaders, name, VALUE);
            }
            Action::Continue
        }
    }
}
