//! Functions of the next object after this library (`dlsym(RTLD_NEXT)`),
//! looked up once: the tables the interposers, the coherence check's
//! call wrappers and the signal handler forward through.
//!
//! `dlsym` takes the dynamic linker's lock and may allocate, so a signal
//! handler must never reach it: the functions a handler may call are
//! looked up when the library loads (`start::resolve_before_handlers`),
//! into a [`Resolved`] table that the handler side reads with one load
//! ([`NextFns::ready`]); only calls that no handler makes look a missing
//! function up again ([`NextFns::get`]). A table used before the library
//! loaded (an interposer called by another library's constructor, when no
//! handler of ours exists) looks itself up first.

use std::ffi::CStr;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::signals::Resolved;

/// The next definition of `name` after this library; 0 when none.
pub(crate) fn next(name: &CStr) -> usize {
    // SAFETY: dlsym with a NUL-terminated name; RTLD_NEXT finds the next
    // definition, never this library's.
    unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) as usize }
}

/// Named functions of the next object.
pub(crate) struct NextFns<const N: usize> {
    names: [&'static CStr; N],
    /// What was found (0: not found, or not looked up yet). Read by the
    /// handler side without a lookup.
    pub(crate) resolved: Resolved<N>,
    /// Set once every function of the table was looked up.
    all_looked_up: AtomicBool,
}

impl<const N: usize> NextFns<N> {
    pub(crate) const fn new(names: [&'static CStr; N]) -> Self {
        NextFns {
            names,
            resolved: Resolved::new(),
            all_looked_up: AtomicBool::new(false),
        }
    }

    /// Looks every function up now (before a handler may need one).
    #[cfg_attr(test, allow(dead_code))]
    pub(crate) fn resolve_all(&self) {
        for i in 0..N {
            self.get(i);
        }
        self.all_looked_up.store(true, Ordering::Release);
    }

    /// Function `i` as the table holds it: one load once the library has
    /// loaded (what a handler reads). Before that, the whole table is
    /// looked up first.
    #[inline]
    #[cfg_attr(test, allow(dead_code))]
    pub(crate) fn ready(&self, i: usize) -> usize {
        if !self.all_looked_up.load(Ordering::Acquire) {
            self.resolve_all();
        }
        self.resolved.get(i)
    }

    /// The address of function `i`, 0 when no later object defines it;
    /// looked up now if it was not found before. Never from a handler:
    /// it reads [`NextFns::resolved`] instead.
    pub(crate) fn get(&self, i: usize) -> usize {
        let f = self.resolved.get(i);
        if f != 0 {
            return f;
        }
        let f = self.names.get(i).map_or(0, |n| next(n));
        self.resolved.set(i, f);
        f
    }
}
