//! Functions of the next object after this library (`dlsym(RTLD_NEXT)`),
//! looked up once: the one table the interposers, the coherence check's
//! call wrappers and its fault handler forward through.

use std::ffi::CStr;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Named functions of the next object, each looked up at its first use
/// (0: not found; asked again next time).
pub(crate) struct NextFns<const N: usize> {
    names: [&'static CStr; N],
    found: [AtomicUsize; N],
}

impl<const N: usize> NextFns<N> {
    pub(crate) const fn new(names: [&'static CStr; N]) -> Self {
        NextFns {
            names,
            found: [const { AtomicUsize::new(0) }; N],
        }
    }

    /// The address of function `i`, 0 when no later object defines it.
    pub(crate) fn get(&self, i: usize) -> usize {
        let f = self.found[i].load(Ordering::Acquire);
        if f != 0 {
            return f;
        }
        // SAFETY: dlsym with a NUL-terminated name; RTLD_NEXT finds the
        // next definition, never this library's.
        let f = unsafe { libc::dlsym(libc::RTLD_NEXT, self.names[i].as_ptr()) } as usize;
        self.found[i].store(f, Ordering::Release);
        f
    }
}
