//! The exports' logic, generic over the host: one VM's state, how each
//! callback reaches it, and the deletes that arrive while it is busy.
//! `filter` (wasm32) is the ABI: each export is a shim that calls one of
//! these with the real proxy. The tests call them natively with the mock.

use crate::host::{DataStatus, HeadersStatus, Host, Level};
use crate::lifecycle::Vm;
use std::cell::RefCell;

/// One VM's state (one per thread: one per Envoy worker).
#[derive(Default)]
pub struct Dispatch {
    vm: RefCell<Vm>,
    /// Deletes that arrived while the VM was busy: never seen from Envoy,
    /// which defers its calls past the current one; kept for any host that
    /// calls back into the module from inside a host call.
    deferred: RefCell<Vec<u32>>,
    /// Requests whose headers came inside another callback and were held
    /// (fail closed) without the VM seeing them: their body and trailers
    /// go no further either, never forwarded without stamps.
    stopped: RefCell<Vec<u32>>,
}

impl Dispatch {
    /// Runs `f` on the VM state, the deferred deletes done first; `or`
    /// (logged) when the state is in use: a callback inside another.
    fn with_vm<H: Host, T>(&self, host: &mut H, or: T, f: impl FnOnce(&mut Vm, &mut H) -> T) -> T {
        let Ok(mut vm) = self.vm.try_borrow_mut() else {
            host.log(
                Level::Critical,
                "hookstamp: a callback arrived inside another",
            );
            return or;
        };
        let deferred = std::mem::take(&mut *self.deferred.borrow_mut());
        for c in deferred {
            vm.on_delete(c);
        }
        f(&mut vm, host)
    }

    /// proxy_on_context_create.
    pub fn context_create(&self, host: &mut impl Host, context: u32, parent: u32) {
        self.with_vm(host, (), |vm, _| vm.on_context_create(context, parent));
    }

    /// proxy_on_configure: 1 when the configuration is taken.
    pub fn configure(&self, host: &mut impl Host, root: u32) -> u32 {
        u32::from(self.with_vm(host, false, |vm, host| vm.on_configure(host, root)))
    }

    /// proxy_on_request_headers. Fail closed: a request the filter cannot
    /// look at is held, not passed.
    pub fn request_headers(&self, host: &mut impl Host, context: u32, end: u32) -> u32 {
        let status = self.with_vm(host, None, |vm, host| {
            Some(vm.on_request_headers(host, context, end != 0))
        });
        let status = status.unwrap_or_else(|| {
            self.stopped.borrow_mut().push(context);
            HeadersStatus::StopIteration
        });
        status as u32
    }

    fn was_stopped(&self, context: u32) -> bool {
        self.stopped.borrow().contains(&context)
    }

    /// proxy_on_request_body.
    pub fn request_body(&self, host: &mut impl Host, context: u32, size: usize, end: u32) -> u32 {
        if self.was_stopped(context) {
            return DataStatus::StopNoBuffer as u32;
        }
        let status = self.with_vm(host, DataStatus::StopNoBuffer, |vm, host| {
            vm.on_request_body(host, context, size, end != 0)
        });
        status as u32
    }

    /// proxy_on_request_trailers.
    pub fn request_trailers(&self, host: &mut impl Host, context: u32) -> u32 {
        if self.was_stopped(context) {
            return HeadersStatus::StopIteration as u32;
        }
        let status = self.with_vm(host, HeadersStatus::StopIteration, |vm, host| {
            vm.on_request_trailers(host, context)
        });
        status as u32
    }

    /// proxy_on_tick.
    pub fn tick(&self, host: &mut impl Host, root: u32) {
        self.with_vm(host, (), |vm, host| vm.on_tick(host, root));
    }

    /// proxy_on_delete: done now, or before the next callback when the VM
    /// is busy.
    pub fn delete(&self, context: u32) {
        self.stopped.borrow_mut().retain(|c| *c != context);
        match self.vm.try_borrow_mut() {
            Ok(mut vm) => vm.on_delete(context),
            Err(_) => self.deferred.borrow_mut().push(context),
        }
    }

    /// How many requests the VM holds for their body, and their bytes;
    /// `None` while a callback runs.
    pub fn held(&self) -> Option<(usize, usize)> {
        let vm = self.vm.try_borrow().ok()?;
        Some((vm.held_requests(), vm.held_bytes()))
    }
}
