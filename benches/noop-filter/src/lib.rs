//! An empty proxy-wasm filter: every callback answers Continue (the SDK's
//! defaults). Built with hookstamp's exports, it is the floor that any
//! filter on this SDK pays in Envoy's V8, whatever it does.

#[cfg(target_arch = "wasm32")]
mod filter {
    use proxy_wasm::traits::{Context, HttpContext, RootContext};
    use proxy_wasm::types::ContextType;

    proxy_wasm::main! {{
        proxy_wasm::set_root_context(|_| -> Box<dyn RootContext> { Box::new(Root) });
    }}

    struct Root;

    impl Context for Root {}

    impl RootContext for Root {
        fn create_http_context(&self, _context_id: u32) -> Option<Box<dyn HttpContext>> {
            Some(Box::new(Pass))
        }

        fn get_type(&self) -> Option<ContextType> {
            Some(ContextType::HttpContext)
        }
    }

    struct Pass;

    impl Context for Pass {}

    impl HttpContext for Pass {}
}
