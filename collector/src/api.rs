//! The OpenACC API routines (`acc_copyin`, `acc_update_self`, `acc_wait`,
//! ...), interposed so the copies and waits they cause are tied to the
//! application line that called them.
//!
//! libgomp sends no acc_prof events for these routines, so without this
//! the copies CUPTI sees inside them belong to no construct. Each routine
//! is exported here under its own name; the preload makes the
//! application's calls land here first. An entry is a two-instruction
//! trampoline that passes its own return address (the application's call
//! site) as one more argument to the Rust body, which opens a region like
//! a construct start does (driver calls and acc_prof events inside take
//! it), records an [`ApiCall`] start, calls the runtime's routine (see
//! [`resolve`]), then closes the region and records the end.
//!
//! Only the outermost call on a thread records: a routine the runtime
//! calls from inside another (or from inside a construct) is that one's
//! work. If no loaded object defines the routine (code that probes for a
//! runtime with `dlsym` finds these entries), the entry does what the
//! runtime does on the host device, whose memory is the host's:
//! `acc_copyin` returns the host address, `acc_malloc` is `malloc`, the
//! `acc_memcpy_*` routines copy, the rest do nothing; the trace says so.

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};

use accprof_trace::{ApiCall, ApiPhase, CallSiteId, Level, Record, RegionId, StringId};

use crate::callsite::{self, Caller};
use crate::event::Event;
use crate::tls::{PerThread, THREAD};
use crate::{clock, region, sink, state};

/// `REAL` value that means "no runtime definition: behave as the host
/// device" (set only by tests; a failed lookup is not stored).
const MISSING: usize = 1;

/// What a call was given, as the trace records it.
#[derive(Clone, Copy, Default)]
struct Args {
    host_ptr: Option<u64>,
    bytes: Option<u64>,
    queue: Option<i32>,
}

fn range(host: *const c_void, bytes: usize) -> Args {
    Args {
        host_ptr: Some(host as u64),
        bytes: Some(bytes as u64),
        queue: None,
    }
}

fn queued(args: Args, queue: c_int) -> Args {
    Args {
        queue: Some(queue),
        ..args
    }
}

fn queue(queue: c_int) -> Args {
    queued(Args::default(), queue)
}

/// An outermost call in progress.
struct Open {
    routine: Routine,
    region: RegionId,
    /// Open regions on the thread before the call.
    depth: usize,
}

/// The runtime's definition of `r` (None when there is none), looked up
/// once found.
///
/// # Safety
/// `F` must be the function pointer type of routine `r`.
#[inline]
unsafe fn real<F: Copy>(r: Routine) -> Option<F> {
    let mut v = REAL[r as usize].load(Ordering::Relaxed);
    if v == 0 {
        v = resolve(r);
    }
    if v == MISSING {
        return None;
    }
    // SAFETY: `v` is the non-NULL address dlsym gave for this routine's
    // name, and F is its function pointer type (caller's promise), the
    // size of a usize.
    Some(unsafe { std::mem::transmute_copy::<usize, F>(&v) })
}

/// Finds the runtime's definition of `r`: next in the global scope (the
/// program linked the runtime), else in any loaded object's own scope (a
/// library opened with RTLD_LOCAL, e.g. a Python extension, that brought the
/// runtime with it and whose calls bind to this preload first). Not found
/// is not remembered: the runtime may be loaded later.
#[cold]
fn resolve(r: Routine) -> usize {
    let name = NAMES[r as usize];
    let ours = entry(r);
    let usable = |sym: *mut c_void| !sym.is_null() && sym as usize != ours;
    // SAFETY: dlsym with a NUL-terminated name (every NAMES entry ends in
    // NUL); RTLD_NEXT searches the objects loaded after this one.
    let mut sym = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr().cast()) };
    if !usable(sym) {
        sym = std::ptr::null_mut();
        for path in loaded_objects() {
            // SAFETY: RTLD_NOLOAD only returns a handle to an object already
            // loaded (none is loaded or initialized here); the handle is
            // closed again, which only drops the count it took.
            unsafe {
                let h = libc::dlopen(path.as_ptr(), libc::RTLD_LAZY | libc::RTLD_NOLOAD);
                if h.is_null() {
                    continue;
                }
                let found = libc::dlsym(h, name.as_ptr().cast());
                libc::dlclose(h);
                if usable(found) {
                    sym = found;
                    break;
                }
            }
        }
    }
    if sym.is_null() {
        say_missing(r);
        return MISSING;
    }
    REAL[r as usize].store(sym as usize, Ordering::Relaxed);
    sym as usize
}

/// Notes in the trace, once per routine, that a call found no runtime.
#[cold]
fn say_missing(r: Routine) {
    static SAID: AtomicU64 = AtomicU64::new(0);
    let bit = 1u64 << (r as u32);
    if !state::enabled() || SAID.fetch_or(bit, Ordering::Relaxed) & bit != 0 {
        return;
    }
    let name = NAMES[r as usize];
    sink::push(Record::Diagnostic {
        time_ns: clock::now_ns(),
        level: Level::Warning,
        message: format!(
            "{} was called but no loaded object defines it: the collector did what the host device does",
            &name[..name.len() - 1]
        ),
    });
}

/// Paths of the loaded shared objects, in load order (the loader's lock is
/// held while listing them, so they are opened only afterwards).
fn loaded_objects() -> Vec<std::ffi::CString> {
    unsafe extern "C" fn each(
        info: *mut libc::dl_phdr_info,
        _size: libc::size_t,
        data: *mut c_void,
    ) -> c_int {
        // SAFETY: the loader passes a valid dl_phdr_info for the call, and
        // `data` is the Vec passed to dl_iterate_phdr below.
        let (info, out) = unsafe { (&*info, &mut *data.cast::<Vec<std::ffi::CString>>()) };
        if !info.dlpi_name.is_null() {
            // SAFETY: dlpi_name is a NUL-terminated string owned by the loader.
            let name = unsafe { std::ffi::CStr::from_ptr(info.dlpi_name) };
            if !name.is_empty() {
                out.push(name.to_owned());
            }
        }
        0
    }
    let mut out: Vec<std::ffi::CString> = Vec::new();
    // SAFETY: the callback only reads the loader's structures during the
    // call and writes into `out`, which outlives it.
    unsafe { libc::dl_iterate_phdr(Some(each), (&mut out as *mut Vec<std::ffi::CString>).cast()) };
    out
}

/// The routine's name, interned once per process (per child after fork).
fn routine_id(r: Routine) -> StringId {
    let id = IDS[r as usize].load(Ordering::Relaxed);
    if id != 0 {
        return StringId(id);
    }
    let name = NAMES[r as usize];
    let id = sink::intern(&name.as_bytes()[..name.len() - 1]);
    IDS[r as usize].store(id.0, Ordering::Relaxed);
    id
}

/// After fork the child's trace defines its strings again.
pub(crate) fn reset_after_fork() {
    for id in &IDS {
        id.store(0, Ordering::Relaxed);
    }
}

/// Runs `call` (the runtime's routine) between the records of an
/// outermost call. Bookkeeping never keeps `call` from running once.
#[inline(always)]
fn around<R>(r: Routine, return_address: usize, args: Args, call: impl FnOnce() -> R) -> R {
    let open = if state::enabled() {
        guard(|| begin(r, return_address as u64, args))
    } else {
        None
    };
    let out = call();
    if let Some(open) = open {
        guard(|| {
            end(open);
            None::<()>
        });
    }
    out
}

/// Runs collector code of an entry, turning a panic into a quiet disable.
#[inline(always)]
fn guard<T>(f: impl FnOnce() -> Option<T>) -> Option<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|_| {
        state::disable("internal error in an OpenACC API routine");
        None
    })
}

fn begin(r: Routine, return_address: u64, args: Args) -> Option<Open> {
    // A fixed point in this frame for the unwind a runtime caller needs
    // (see callsite::capture).
    let anchor = std::hint::black_box(0u64);
    let anchor = &anchor as *const u64 as usize;
    THREAD
        .try_with(|t| {
            if t.in_api.get() {
                return None;
            }
            let call_site = match callsite::caller(return_address) {
                Caller::App(site) => site,
                // The runtime calling its own routine inside a construct:
                // the construct's work.
                Caller::Runtime if t.depth.get() > 0 => return None,
                // A runtime wrapper (e.g. a Fortran binding) called by the
                // application: find the application's frame.
                Caller::Runtime => callsite::capture(anchor),
            };
            Some(start(t, r, call_site, args))
        })
        .ok()
        .flatten()
}

fn start(t: &PerThread, r: Routine, call_site: Option<CallSiteId>, args: Args) -> Open {
    t.in_api.set(true);
    let depth = t.depth.get();
    let region = region::open_in(t);
    push(
        t,
        ApiCall {
            // Converted to ns by the writer (see clock).
            time_ns: clock::stamp(),
            thread: clock::thread_id_in(t),
            region,
            phase: ApiPhase::Start,
            routine: routine_id(r),
            call_site,
            host_ptr: args.host_ptr,
            bytes: args.bytes,
            async_queue: args.queue,
        },
    );
    Open {
        routine: r,
        region,
        depth,
    }
}

fn end(open: Open) {
    let time_ns = clock::stamp();
    let _ = THREAD.try_with(|t| {
        region::close_to_in(t, open.depth);
        push(
            t,
            ApiCall {
                time_ns,
                thread: clock::thread_id_in(t),
                region: open.region,
                phase: ApiPhase::End,
                routine: routine_id(open.routine),
                call_site: None,
                host_ptr: None,
                bytes: None,
                async_queue: None,
            },
        );
        t.in_api.set(false);
    });
}

/// Buffers one record on the thread `t` belongs to.
#[inline]
fn push(t: &PerThread, call: ApiCall) {
    sink::push_with(t, |slot| {
        // SAFETY: `slot` is writable space for one event.
        unsafe { slot.write(Event::Api(call)) };
        true
    });
}

/// Copies `n` bytes as the host device does for the `acc_memcpy_*`
/// routines.
///
/// # Safety
/// As for `memmove`, when `n` is not 0.
unsafe fn host_copy(dst: *mut c_void, src: *const c_void, n: usize) {
    if n != 0 && !dst.is_null() && !src.is_null() {
        // SAFETY: the caller's promise (the routine's own contract).
        unsafe { libc::memmove(dst, src, n) };
    }
}

/// An exported entry: passes its return address (x86-64: at `[rsp]` on
/// entry; AArch64: in x30) in the register of the next integer argument and
/// jumps to the body, so the body returns straight to the application.
macro_rules! trampoline {
    ($name:ident, $body:ident, ($($a:ident: $t:ty),*) -> $r:ty, $x86:literal, $arm:literal) => {
        #[unsafe(naked)]
        #[no_mangle]
        #[allow(clippy::unused_unit, unused_variables)]
        pub unsafe extern "C" fn $name($($a: $t),*) -> $r {
            #[cfg(target_arch = "x86_64")]
            std::arch::naked_asm!(concat!("mov ", $x86, ", [rsp]"), "jmp {f}", f = sym $body);
            #[cfg(target_arch = "aarch64")]
            std::arch::naked_asm!(concat!("mov ", $arm, ", x30"), "b {f}", f = sym $body);
        }
    };
}

/// Every interposed routine: variant, exported name, body name,
/// parameters and return type, the registers of its return-address
/// argument (x86-64, AArch64), what the trace records of its arguments,
/// and what it does when the runtime has no definition.
macro_rules! routines {
    ($(
        $v:ident $name:ident $body:ident ($($a:ident: $t:ty),*) -> $r:ty,
        $x86:literal $arm:literal, $args:expr, $fallback:expr;
    )*) => {
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub(crate) enum Routine { $($v),* }

        // One bit per routine in say_missing.
        const _: () = assert!(NAMES.len() <= 64);

        /// Names, NUL-terminated, indexed by [`Routine`].
        const NAMES: &[&str] = &[$(concat!(stringify!($name), "\0")),*];

        /// The address of our own entry for `r` (never taken for the
        /// runtime's).
        fn entry(r: Routine) -> usize {
            match r {
                $(Routine::$v => $name as unsafe extern "C" fn($($t),*) -> $r as usize),*
            }
        }

        /// The runtime's definitions: 0 not looked up yet, MISSING, or the
        /// address.
        static REAL: [AtomicUsize; NAMES.len()] = [const { AtomicUsize::new(0) }; NAMES.len()];

        /// Interned names (0: not yet).
        static IDS: [AtomicU32; NAMES.len()] = [const { AtomicU32::new(0) }; NAMES.len()];

        $(
            trampoline!($name, $body, ($($a: $t),*) -> $r, $x86, $arm);

            #[allow(clippy::unused_unit)]
            unsafe extern "C" fn $body($($a: $t,)* return_address: usize) -> $r {
                type Real = unsafe extern "C" fn($($t),*) -> $r;
                around(Routine::$v, return_address, $args, || {
                    // SAFETY: Real is the routine's C signature.
                    match unsafe { real::<Real>(Routine::$v) } {
                        // SAFETY: the runtime's routine, called with the
                        // application's own arguments.
                        Some(f) => unsafe { f($($a),*) },
                        None => $fallback,
                    }
                })
            }
        )*
    };
}

routines! {
    Copyin acc_copyin copyin_body(h: *mut c_void, n: usize) -> *mut c_void,
        "rdx" "x2", range(h, n), h;
    PresentOrCopyin acc_present_or_copyin present_or_copyin_body(h: *mut c_void, n: usize) -> *mut c_void,
        "rdx" "x2", range(h, n), h;
    Pcopyin acc_pcopyin pcopyin_body(h: *mut c_void, n: usize) -> *mut c_void,
        "rdx" "x2", range(h, n), h;
    Create acc_create create_body(h: *mut c_void, n: usize) -> *mut c_void,
        "rdx" "x2", range(h, n), h;
    PresentOrCreate acc_present_or_create present_or_create_body(h: *mut c_void, n: usize) -> *mut c_void,
        "rdx" "x2", range(h, n), h;
    Pcreate acc_pcreate pcreate_body(h: *mut c_void, n: usize) -> *mut c_void,
        "rdx" "x2", range(h, n), h;
    Copyout acc_copyout copyout_body(h: *mut c_void, n: usize) -> (),
        "rdx" "x2", range(h, n), ();
    CopyoutFinalize acc_copyout_finalize copyout_finalize_body(h: *mut c_void, n: usize) -> (),
        "rdx" "x2", range(h, n), ();
    Delete acc_delete delete_body(h: *mut c_void, n: usize) -> (),
        "rdx" "x2", range(h, n), ();
    DeleteFinalize acc_delete_finalize delete_finalize_body(h: *mut c_void, n: usize) -> (),
        "rdx" "x2", range(h, n), ();
    UpdateDevice acc_update_device update_device_body(h: *mut c_void, n: usize) -> (),
        "rdx" "x2", range(h, n), ();
    UpdateSelf acc_update_self update_self_body(h: *mut c_void, n: usize) -> (),
        "rdx" "x2", range(h, n), ();
    CopyinAsync acc_copyin_async copyin_async_body(h: *mut c_void, n: usize, q: c_int) -> (),
        "rcx" "x3", queued(range(h, n), q), ();
    CreateAsync acc_create_async create_async_body(h: *mut c_void, n: usize, q: c_int) -> (),
        "rcx" "x3", queued(range(h, n), q), ();
    CopyoutAsync acc_copyout_async copyout_async_body(h: *mut c_void, n: usize, q: c_int) -> (),
        "rcx" "x3", queued(range(h, n), q), ();
    CopyoutFinalizeAsync acc_copyout_finalize_async copyout_finalize_async_body(h: *mut c_void, n: usize, q: c_int) -> (),
        "rcx" "x3", queued(range(h, n), q), ();
    DeleteAsync acc_delete_async delete_async_body(h: *mut c_void, n: usize, q: c_int) -> (),
        "rcx" "x3", queued(range(h, n), q), ();
    DeleteFinalizeAsync acc_delete_finalize_async delete_finalize_async_body(h: *mut c_void, n: usize, q: c_int) -> (),
        "rcx" "x3", queued(range(h, n), q), ();
    UpdateDeviceAsync acc_update_device_async update_device_async_body(h: *mut c_void, n: usize, q: c_int) -> (),
        "rcx" "x3", queued(range(h, n), q), ();
    UpdateSelfAsync acc_update_self_async update_self_async_body(h: *mut c_void, n: usize, q: c_int) -> (),
        "rcx" "x3", queued(range(h, n), q), ();
    MemcpyToDevice acc_memcpy_to_device memcpy_to_device_body(d: *mut c_void, h: *mut c_void, n: usize) -> (),
        // SAFETY: the runtime lacks the routine, which means no OpenACC
        // runtime with device support (they all define it): the program
        // runs on the host device, where device addresses are host
        // addresses, so the routine's contract (`d` and `h` each valid for
        // `n` bytes) is memmove's.
        "rcx" "x3", range(h, n), unsafe { host_copy(d, h, n) };
    MemcpyFromDevice acc_memcpy_from_device memcpy_from_device_body(h: *mut c_void, d: *mut c_void, n: usize) -> (),
        // SAFETY: as for acc_memcpy_to_device, the other way round.
        "rcx" "x3", range(h, n), unsafe { host_copy(h, d, n) };
    MemcpyDevice acc_memcpy_device memcpy_device_body(d: *mut c_void, s: *mut c_void, n: usize) -> (),
        // SAFETY: as for acc_memcpy_to_device: on the host device `d` and
        // `s` are host addresses valid for `n` bytes (the routine's contract).
        "rcx" "x3", Args { bytes: Some(n as u64), ..Args::default() }, unsafe { host_copy(d, s, n) };
    MemcpyToDeviceAsync acc_memcpy_to_device_async memcpy_to_device_async_body(d: *mut c_void, h: *mut c_void, n: usize, q: c_int) -> (),
        // SAFETY: as for acc_memcpy_to_device; the host device has no
        // queues, so the copy is done before the call returns.
        "r8" "x4", queued(range(h, n), q), unsafe { host_copy(d, h, n) };
    MemcpyFromDeviceAsync acc_memcpy_from_device_async memcpy_from_device_async_body(h: *mut c_void, d: *mut c_void, n: usize, q: c_int) -> (),
        // SAFETY: as for acc_memcpy_from_device; done before the call
        // returns.
        "r8" "x4", queued(range(h, n), q), unsafe { host_copy(h, d, n) };
    MapData acc_map_data map_data_body(h: *mut c_void, d: *mut c_void, n: usize) -> (),
        "rcx" "x3", range(h, n), ();
    UnmapData acc_unmap_data unmap_data_body(h: *mut c_void) -> (),
        "rsi" "x1", Args { host_ptr: Some(h as u64), ..Args::default() }, ();
    Malloc acc_malloc malloc_body(n: usize) -> *mut c_void,
        // SAFETY: malloc takes any size and has no other precondition; it is
        // the host device's allocator.
        "rsi" "x1", Args { bytes: Some(n as u64), ..Args::default() }, unsafe { libc::malloc(n) };
    Free acc_free free_body(d: *mut c_void) -> (),
        // SAFETY: by the routine's contract `d` is NULL or came from
        // acc_malloc, which with no runtime behind it is the malloc above.
        "rsi" "x1", Args::default(), unsafe { libc::free(d) };
    Wait acc_wait wait_body(q: c_int) -> (),
        "rsi" "x1", queue(q), ();
    AsyncWait acc_async_wait async_wait_body(q: c_int) -> (),
        "rsi" "x1", queue(q), ();
    WaitAsync acc_wait_async wait_async_body(q: c_int, on: c_int) -> (),
        "rdx" "x2", { let _ = on; queue(q) }, ();
    WaitAll acc_wait_all wait_all_body() -> (),
        "rdi" "x0", Args::default(), ();
    AsyncWaitAll acc_async_wait_all async_wait_all_body() -> (),
        "rdi" "x0", Args::default(), ();
    WaitAllAsync acc_wait_all_async wait_all_async_body(q: c_int) -> (),
        "rsi" "x1", queue(q), ();
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// The tests swap entries of REAL: one at a time.
    static SERIAL: Mutex<()> = Mutex::new(());

    static SEEN: Mutex<Vec<(usize, usize)>> = Mutex::new(Vec::new());

    unsafe extern "C" fn fake_copyin(h: *mut c_void, n: usize) -> *mut c_void {
        SEEN.lock().expect("seen").push((h as usize, n));
        (h as usize + 0x1000) as *mut c_void
    }

    unsafe extern "C" fn fake_malloc(n: usize) -> *mut c_void {
        SEEN.lock().expect("seen").push((0, n));
        0xdead_0000usize as *mut c_void
    }

    unsafe extern "C" fn fake_wait_async(q: c_int, on: c_int) {
        SEEN.lock().expect("seen").push((q as usize, on as usize));
    }

    fn with_real<T>(r: Routine, f: usize, body: impl FnOnce() -> T) -> T {
        REAL[r as usize].store(f, Ordering::Relaxed);
        let out = body();
        REAL[r as usize].store(0, Ordering::Relaxed);
        out
    }

    #[test]
    fn arguments_and_results_pass_through_unchanged() {
        let _one = SERIAL.lock().expect("serial");
        SEEN.lock().expect("seen").clear();
        let mut buf = [0u8; 64];
        let h = buf.as_mut_ptr().cast::<c_void>();
        // SAFETY: the entries with fakes standing in for the runtime.
        let (d, m) = unsafe {
            let d = with_real(Routine::Copyin, fake_copyin as *const () as usize, || {
                acc_copyin(h, 48)
            });
            let m = with_real(Routine::Malloc, fake_malloc as *const () as usize, || {
                acc_malloc(1 << 40)
            });
            with_real(
                Routine::WaitAsync,
                fake_wait_async as *const () as usize,
                || acc_wait_async(3, -7_i32),
            );
            (d, m)
        };
        assert_eq!(d as usize, h as usize + 0x1000);
        assert_eq!(m as usize, 0xdead_0000);
        assert_eq!(
            *SEEN.lock().expect("seen"),
            vec![(h as usize, 48), (0, 1 << 40), (3, -7_i32 as usize)]
        );
    }

    #[test]
    fn without_a_runtime_the_host_device_is_emulated() {
        let _one = SERIAL.lock().expect("serial");
        let mut src = *b"device bytes";
        let mut dst = [0u8; 12];
        let s = src.as_mut_ptr().cast::<c_void>();
        let d = dst.as_mut_ptr().cast::<c_void>();
        // SAFETY: the entries with no runtime behind them; buffers valid
        // for the sizes given.
        unsafe {
            let copied = with_real(Routine::Copyin, MISSING, || acc_copyin(s, 12));
            assert_eq!(copied, s);
            with_real(Routine::MemcpyToDevice, MISSING, || {
                acc_memcpy_to_device(d, s, 12)
            });
            assert_eq!(&dst, b"device bytes");
            let m = with_real(Routine::Malloc, MISSING, || acc_malloc(16));
            assert!(!m.is_null());
            with_real(Routine::Free, MISSING, || acc_free(m));
            with_real(Routine::Wait, MISSING, || acc_wait(1));
        }
    }

    #[test]
    fn only_the_outermost_call_records_and_its_region_is_current_inside() {
        let depth = || THREAD.with(|t| t.depth.get());
        let before = depth();
        let outer = begin(Routine::Copyin, 0, range(std::ptr::null(), 8)).expect("outer records");
        THREAD.with(|t| {
            assert!(t.in_api.get());
            assert_eq!(region::current_in(t), outer.region);
        });
        // A routine the runtime calls from inside the first one.
        assert!(begin(Routine::Create, 0, range(std::ptr::null(), 8)).is_none());
        // A start the runtime never ended, inside the call.
        THREAD.with(region::open_in);
        end(outer);
        THREAD.with(|t| assert!(!t.in_api.get()));
        assert_eq!(depth(), before);
        // The next call records again.
        let again = begin(Routine::Wait, 0, queue(1)).expect("next call records");
        end(again);
    }

    #[test]
    fn the_runtime_calling_a_routine_inside_a_construct_records_nothing() {
        crate::callsite::init();
        // Inside the collector's own code: a runtime frame.
        let runtime = begin as *const () as u64 + 1;
        let construct = THREAD.with(region::open_in);
        assert!(begin(Routine::WaitAsync, runtime, queue(2)).is_none());
        THREAD.with(|t| {
            assert!(!t.in_api.get());
            assert_eq!(region::current_in(t), construct);
            region::close_in(t);
        });
    }

    #[test]
    fn names_match_the_routines() {
        assert_eq!(NAMES[Routine::Copyin as usize], "acc_copyin\0");
        assert_eq!(
            NAMES[Routine::WaitAllAsync as usize],
            "acc_wait_all_async\0"
        );
        assert_ne!(entry(Routine::Copyin), entry(Routine::Create));
    }
}
