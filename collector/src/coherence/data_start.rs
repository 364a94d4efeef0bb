//! GCC's entry point of the `data` construct, wrapped while the coherence
//! check runs: its arguments are the construct's clauses (host address,
//! bytes and map kind of each array), which name the arrays that
//! `create` maps without a copy. libgomp's own lookup by device address
//! (`acc_hostptr`) cannot tell apart the arrays of one `data` construct
//! (they share one block, and it answers for any of them), so those are
//! learned here: once the runtime has mapped them (the wrapped call
//! returned, holding none of its locks), `acc_deviceptr` gives each
//! array's device address. While the check is off the wrapper costs one
//! load and a branch.

// The unit tests do not interpose (no `no_mangle` there), so the wrapper is
// not called in them.
#![cfg_attr(test, allow(dead_code))]

use std::cell::Cell;
use std::ffi::{c_int, c_void, CStr};

use crate::next_fns::NextFns;

const NAMES: [&CStr; 1] = [c"GOACC_data_start"];
const DATA_START: usize = 0;

static REAL: NextFns<{ NAMES.len() }> = NextFns::new(NAMES);

type DataStartFn = unsafe extern "C" fn(c_int, usize, *mut *mut c_void, *mut usize, *mut u16);

thread_local! {
    /// This thread is inside a `data` construct's entry (the wrapped call).
    static ENTERING: Cell<bool> = const { Cell::new(false) };
}

/// Whether the calling thread is inside a `data` construct's entry: a
/// device block allocated now holds the arrays its clauses name, which the
/// wrapper learns when the call returns (the runtime need not be asked).
pub(super) fn entering() -> bool {
    ENTERING.try_with(Cell::get).unwrap_or(false)
}

/// Map kinds (their low byte, without GCC's "force" bit) that give an
/// array a device copy: alloc (`create`), to, from, tofrom, and their
/// `always` forms. Pointers, descriptors, firstprivate values, device
/// pointers and `present` map nothing new.
fn maps_an_array(kind: u16) -> bool {
    matches!(kind & 0x7f, 0..=3 | 0x11..=0x13)
}

/// # Safety
/// As the function of GCC's libgomp: `hostaddrs`, `sizes` and `kinds`
/// hold `mapnum` entries each.
#[cfg_attr(not(test), no_mangle)]
#[allow(non_snake_case)]
pub unsafe extern "C" fn GOACC_data_start(
    flags: c_int,
    mapnum: usize,
    hostaddrs: *mut *mut c_void,
    sizes: *mut usize,
    kinds: *mut u16,
) {
    let f = REAL.get(DATA_START);
    if f == 0 {
        // Not reachable from a program linked with libgomp, which defines
        // it; nothing to forward to.
        return;
    }
    let on = super::on();
    if on {
        let _ = ENTERING.try_with(|e| e.set(true));
    }
    // SAFETY: the next GOACC_data_start, with the caller's arguments.
    unsafe { std::mem::transmute::<usize, DataStartFn>(f)(flags, mapnum, hostaddrs, sizes, kinds) };
    if on {
        let _ = ENTERING.try_with(|e| e.set(false));
    }
    if !on || mapnum == 0 || hostaddrs.is_null() || sizes.is_null() || kinds.is_null() {
        return;
    }
    let start = crate::clock::now_ns();
    let _ = std::panic::catch_unwind(|| {
        let Some((_, _, deviceptr)) = super::lookup::routines() else {
            return;
        };
        // SAFETY: the caller's arrays of `mapnum` entries (GCC's calling
        // convention for the construct), read after the runtime used them.
        let (h, s, k) = unsafe {
            (
                std::slice::from_raw_parts(hostaddrs, mapnum),
                std::slice::from_raw_parts(sizes, mapnum),
                std::slice::from_raw_parts(kinds, mapnum),
            )
        };
        let mut arrays = Vec::new();
        for i in 0..mapnum {
            if !maps_an_array(k[i]) || h[i].is_null() || s[i] == 0 {
                continue;
            }
            // SAFETY: the runtime's acc_deviceptr, on this thread, which
            // holds none of its locks once the construct's entry returned.
            let dev = unsafe { deviceptr(h[i]) } as u64;
            if dev != 0 {
                arrays.push(super::lookup::Found {
                    host: h[i] as u64,
                    bytes: s[i] as u64,
                    device: dev,
                });
            }
        }
        super::mapped_by_runtime(arrays);
    });
    super::own_work(start, crate::clock::now_ns());
}

#[cfg(test)]
mod tests {
    use super::maps_an_array;

    /// create, copyin, copyout, copy and their force/always forms map an
    /// array; pointers, descriptors, firstprivate and present do not.
    #[test]
    fn the_kinds_that_map_an_array() {
        for k in [
            0u16, 1, 2, 3, 0x80, 0x81, 0x82, 0x83, 0x11, 0x12, 0x13, 0x0203,
        ] {
            assert!(maps_an_array(k), "{k:#x}");
        }
        for k in [4u16, 5, 6, 7, 8, 12, 13, 14, 0x86] {
            assert!(!maps_an_array(k), "{k:#x}");
        }
    }
}
