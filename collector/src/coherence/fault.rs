//! The coherence check's side of its fault handler that runs outside it:
//! the snapshot of watched ranges published for the handler (copied into
//! pages of its own), the replaced snapshots unmapped once no handler can
//! read them, the page size, and what each thread tells the handler
//! before it can fault (its stack's end, the constructs it is inside).
//!
//! The handler side (the claim on a fault, the fault ring, the snapshot's
//! reader) is in `signals`, with everything else a signal handler runs;
//! its names are re-exported here for the check.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};

use super::table::{Range, Snapshot};

use crate::signals::fault::STACK_END;
#[cfg(test)]
pub(crate) use crate::signals::fault::{capture, BLANK, FRAMES};
pub(crate) use crate::signals::fault::{
    drain, host_call, open_span, Fault, Published, StackCopy, FAULTS, HANDLER_NS, IN_CONSTRUCT,
    OPENED, PAGE, RING_FULL, SAVED, WRITES,
};
use crate::signals::fault::{SHARED_HITS, SHARED_PAGE};

/// The pages beside watched arrays that the program touched at least
/// `min` times (counted by the handler): left open from then on.
pub(crate) fn hot_pages(min: u64) -> Vec<u64> {
    SHARED_PAGE
        .iter()
        .zip(&SHARED_HITS)
        .filter(|(_, h)| h.load(Ordering::Relaxed) >= min)
        .map(|(p, _)| p.load(Ordering::Acquire))
        .filter(|&p| p != 0)
        .collect()
}

/// A copy of `s` in fresh pages, for the handler; null when the system has
/// none.
fn create(s: &Snapshot) -> *mut Published {
    let (ranges_at, spans_at, len) = Published::layout(s.watched.len(), s.spans.len());
    // SAFETY: an anonymous private mapping of `len` bytes; the writes
    // below stay inside it, at offsets aligned for their types.
    unsafe {
        let base = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        if base == libc::MAP_FAILED {
            return std::ptr::null_mut();
        }
        let base = base.cast::<u8>();
        base.cast::<Published>().write(Published {
            mapped: len,
            watched: s.watched.len(),
            spans: s.spans.len(),
        });
        std::ptr::copy_nonoverlapping(
            s.watched.as_ptr(),
            base.add(ranges_at).cast::<Range>(),
            s.watched.len(),
        );
        std::ptr::copy_nonoverlapping(
            s.spans.as_ptr(),
            base.add(spans_at).cast::<(u64, u64)>(),
            s.spans.len(),
        );
        base.cast()
    }
}

/// A replaced snapshot, unmapped when dropped (once no handler can read it).
pub(crate) struct Retired(*mut Published);

// SAFETY: the mapping is owned by this value alone once replaced.
unsafe impl Send for Retired {}

impl Drop for Retired {
    fn drop(&mut self) {
        // SAFETY: a mapping `create` made, `mapped` bytes long, that no
        // handler reads any more (see `publish`).
        unsafe {
            let len = (*self.0).mapped;
            libc::munmap(self.0.cast(), len);
        }
    }
}

/// Publishes `next` for the handler and unmaps the snapshots no handler
/// can still be reading. `retired` holds the replaced ones until then.
pub(crate) fn publish(next: &Snapshot, retired: &mut Vec<Retired>) {
    let new = create(next);
    if new.is_null() {
        // No memory for it: the old one stays, a fault it does not know is
        // passed on as the program's.
        return;
    }
    let old = crate::signals::fault::replace(new);
    if !old.is_null() {
        retired.push(Retired(old));
    }
    // One inside may hold any retired.
    if crate::signals::fault::no_readers() {
        retired.clear();
    }
}

/// Sets the page size and lets the collector's signal handler offer every
/// SIGSEGV and SIGBUS to the check first (it hands the ones the check
/// does not claim on to the program's disposition).
pub(crate) fn install() {
    if INSTALLED.swap(true, Ordering::AcqRel) {
        return;
    }
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if page > 0 && (page as u64).is_power_of_two() {
        PAGE.store(page as u64, Ordering::Relaxed);
    }
    crate::signals::fault::arm();
}

static INSTALLED: AtomicBool = AtomicBool::new(false);

/// Learns where this thread's stack ends, for [`capture`]; once per
/// thread, outside the handler (`pthread_getattr_np` may allocate).
pub(crate) fn learn_stack_end() {
    if STACK_END.try_with(Cell::get).unwrap_or(1) != 0 {
        return;
    }
    // SAFETY: pthread_getattr_np fills the attribute we own, destroyed
    // after reading the stack's address and size.
    let end = unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        if libc::pthread_getattr_np(libc::pthread_self(), &mut attr) != 0 {
            return;
        }
        let mut addr: *mut libc::c_void = std::ptr::null_mut();
        let mut size = 0usize;
        let ok = libc::pthread_attr_getstack(&attr, &mut addr, &mut size) == 0;
        libc::pthread_attr_destroy(&mut attr);
        if !ok {
            return;
        }
        addr as u64 + size as u64
    };
    let _ = STACK_END.try_with(|c| c.set(end));
}

/// Used by the callbacks to keep [`IN_CONSTRUCT`].
pub(crate) fn construct_entered() {
    learn_stack_end();
    let _ = IN_CONSTRUCT.try_with(|c| c.set(c.get().saturating_add(1)));
}

pub(crate) fn construct_left() {
    let _ = IN_CONSTRUCT.try_with(|c| c.set(c.get().saturating_sub(1)));
}

#[cfg(test)]
mod tests {
    use super::super::table::{Range, Snapshot, State};

    /// A shared page touched twice is hot, one touched once is not yet;
    /// the count is per page.
    #[test]
    fn a_shared_page_touched_again_is_hot() {
        use crate::signals::fault::shared_touched;
        // Pages no other test touches.
        let (a, b) = (0x7e57_0000_0000u64, 0x7e57_0000_1000u64);
        shared_touched(a);
        shared_touched(b);
        assert!(!super::hot_pages(2).contains(&a));
        shared_touched(a);
        let hot = super::hot_pages(2);
        assert!(hot.contains(&a));
        assert!(!hot.contains(&b));
        assert!(super::hot_pages(1).contains(&b));
    }

    /// The handler's copy of a stack stops at the first protected page
    /// above the stack pointer, not at one below it.
    #[test]
    fn the_stack_copy_stops_at_the_first_protected_page_above_it() {
        let range = |start: u64| Range {
            start,
            bytes: 8192,
            device: 0,
            name: 0,
            state: State::DeviceNewer { since: 1 },
            unread: None,
            unproven: false,
            gone: false,
        };
        let snap = Snapshot::new(vec![range(0x10000), range(0x40000)], 4096, &[]);
        let p = super::create(&snap);
        assert!(!p.is_null());
        let _gone = super::Retired(p);
        // SAFETY: a snapshot just created, unmapped when `_gone` drops.
        let p = unsafe { &*p };
        assert_eq!(p.protected_from(0x20000), 0x40000);
        assert_eq!(p.protected_from(0x3f000), 0x40000);
        assert_eq!(p.protected_from(0x11000), 0x11000, "inside one: nothing");
        assert_eq!(p.protected_from(0x42000), u64::MAX);
    }
}
