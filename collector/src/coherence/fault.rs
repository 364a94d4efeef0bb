//! The SIGSEGV/SIGBUS handler of the coherence check, and the program's
//! own handlers for those signals, chained behind it.
//!
//! Async-signal-safe: the handler reads the published [`Snapshot`] (an
//! atomic pointer; the callbacks replace it and free old ones only when no
//! handler is inside), writes a fixed ring of fault records, calls
//! `mprotect` and returns. It never allocates, locks or calls the device.
//! With each fault it keeps what the walk out of the faulting code needs
//! (the registers and a window of the thread's stack, in a ring of its
//! own beside the records); the walk itself runs when the ring is drained
//! (see `walk`).
//!
//! It is not a handler of its own: the collector's one handler
//! (`signals`) asks [`claim`] first, and passes a fault the check does not
//! claim on to the program's disposition (which `signals` keeps behind
//! ours, whenever the program sets it).

use std::cell::{Cell, UnsafeCell};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicU8, AtomicUsize, Ordering};

use super::table::{judge, save_window, Prot, Range, Snapshot, Verdict};

/// si_code of a SIGSEGV for an access the page's protection refused.
const SEGV_ACCERR: libc::c_int = 2;

/// Bytes saved around a faulting address for the confirmation.
pub(crate) const SAVED: usize = 64;
/// Faults kept until the next construct boundary; more are counted.
const RING: usize = 256;
/// Stack words saved above the faulting instruction's stack pointer (8
/// KiB): enough for the frames of libgfortran's formatted I/O or libc's
/// stdio between the access and the program's call.
pub(crate) const STACK_WORDS: usize = 1024;
/// Return addresses kept above a faulting instruction.
pub(crate) const FRAMES: usize = accprof_trace::MAX_ACCESS_FRAMES;

/// The registers a walk starts from.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Regs {
    /// The faulting instruction.
    pub pc: u64,
    pub sp: u64,
    /// The frame pointer register (rbp), whatever the code keeps there.
    pub fp: u64,
}

/// What the handler saves for the walk: the registers, then `words`
/// stack words from `regs.sp` up (never past the thread's stack end).
pub(crate) struct StackCopy {
    pub regs: Regs,
    pub words: usize,
    pub stack: [u64; STACK_WORDS],
}

impl StackCopy {
    pub(crate) const EMPTY: StackCopy = StackCopy {
        regs: Regs {
            pc: 0,
            sp: 0,
            fp: 0,
        },
        words: 0,
        stack: [0; STACK_WORDS],
    };
}

/// One fault, as the handler left it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Fault {
    pub time: u64,
    pub thread: u32,
    pub code_addr: u64,
    pub host_addr: u64,
    pub range: super::table::Range,
    /// A write (else a read).
    pub write: bool,
    /// The saved host bytes: `saved_len` bytes from `saved_at`.
    pub saved_at: u64,
    pub saved_len: usize,
    pub saved: [u8; SAVED],
    /// The return addresses above `code_addr`, innermost first: filled
    /// when the ring is drained, from the stack the handler saved, when
    /// the access was made outside the main executable (in a library).
    pub frames: [u64; FRAMES],
    pub nframes: usize,
}

const EMPTY: u8 = 0;
const WRITING: u8 = 1;
const READY: u8 = 2;

struct Slot {
    state: AtomicU8,
    fault: UnsafeCell<Fault>,
    /// The registers and stack for the walk (not in `Fault`: the handler
    /// must not build 8 KiB on its stack, which may be a small sigaltstack).
    stack: UnsafeCell<StackCopy>,
}

// SAFETY: a slot's fault is written only by the handler that moved its
// state EMPTY -> WRITING, and read only by the drainer that moved it
// READY -> WRITING; the state's acquire/release orders the two.
unsafe impl Sync for Slot {}

pub(super) const BLANK: Fault = Fault {
    time: 0,
    thread: 0,
    code_addr: 0,
    host_addr: 0,
    range: super::table::Range {
        start: 0,
        bytes: 0,
        device: 0,
        name: 0,
        state: super::table::State::HostCurrent,
        unread: None,
        unproven: false,
        gone: false,
    },
    write: false,
    saved_at: 0,
    saved_len: 0,
    saved: [0; SAVED],
    frames: [0; FRAMES],
    nframes: 0,
};

static SLOTS: [Slot; RING] = [const {
    Slot {
        state: AtomicU8::new(EMPTY),
        fault: UnsafeCell::new(BLANK),
        stack: UnsafeCell::new(StackCopy::EMPTY),
    }
}; RING];
static NEXT_SLOT: AtomicUsize = AtomicUsize::new(0);

/// Pages the check protected for a watched array that other data shares,
/// which the program touched (an `OurPage` fault): each page and how many
/// times. A page touched again and again (a scalar beside an array, read
/// at every construct) is left open from then on (`hot_pages`), or every
/// construct would pay a fault, a protection change and a new snapshot.
const SHARED: usize = 64;
static SHARED_PAGE: [AtomicU64; SHARED] = [const { AtomicU64::new(0) }; SHARED];
static SHARED_HITS: [AtomicU64; SHARED] = [const { AtomicU64::new(0) }; SHARED];

/// Counts a touch of the shared page `page` (from the handler: atomics
/// only; a page beyond the table's room is not counted).
fn shared_touched(page: u64) {
    for (p, hits) in SHARED_PAGE.iter().zip(&SHARED_HITS) {
        let seen = match p.compare_exchange(0, page, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => page,
            Err(q) => q,
        };
        if seen == page {
            hits.fetch_add(1, Ordering::Relaxed);
            return;
        }
    }
}

/// The shared pages touched at least `min` times.
pub(crate) fn hot_pages(min: u64) -> Vec<u64> {
    SHARED_PAGE
        .iter()
        .zip(&SHARED_HITS)
        .filter(|(_, h)| h.load(Ordering::Relaxed) >= min)
        .map(|(p, _)| p.load(Ordering::Acquire))
        .filter(|&p| p != 0)
        .collect()
}

/// Counters for the exit note.
pub(crate) static FAULTS: AtomicU64 = AtomicU64::new(0);
pub(crate) static HANDLER_NS: AtomicU64 = AtomicU64::new(0);
/// Faults the ring had no room for: what they would have said is lost
/// (the drainer then takes every awaited download for read).
pub(crate) static RING_FULL: AtomicU64 = AtomicU64::new(0);
/// Protection changes the handler made: the callbacks' idea of what is
/// protected is out of date when this moved.
pub(crate) static OPENED: AtomicU64 = AtomicU64::new(0);
/// Host writes into a stale range (not reads: not a C1; not checked).
pub(crate) static WRITES: AtomicU64 = AtomicU64::new(0);
/// Accesses from inside an OpenACC construct (the runtime's own).
pub(crate) static RUNTIME_ACCESSES: AtomicU64 = AtomicU64::new(0);

/// The published snapshot (null: nothing protected).
static SNAPSHOT: AtomicPtr<Published> = AtomicPtr::new(std::ptr::null_mut());
/// Handlers reading a snapshot right now.
static READERS: AtomicUsize = AtomicUsize::new(0);
/// The system page size.
pub(crate) static PAGE: AtomicU64 = AtomicU64::new(4096);

thread_local! {
    /// OpenACC constructs open on this thread: an access from inside one
    /// is the runtime's (its copies), never the program's.
    pub(crate) static IN_CONSTRUCT: Cell<u32> = const { Cell::new(0) };
    /// The end (highest address) of this thread's stack, once known (0:
    /// not yet): the handler's copy of the stack stops there. Learned
    /// outside the handler (`pthread_getattr_np` may allocate).
    static STACK_END: Cell<u64> = const { Cell::new(0) };
}

/// A snapshot as the handler reads it, copied into pages of its own
/// (`mmap`): the handler must never touch the heap, whose pages the check
/// may have protected (a small array shares its page with the allocator's
/// other blocks, the collector's included). The header is followed by the
/// watched ranges, then the page spans.
#[repr(C)]
pub(crate) struct Published {
    mapped: usize,
    watched: usize,
    spans: usize,
}

impl Published {
    fn layout(watched: usize, spans: usize) -> (usize, usize, usize) {
        let ranges_at =
            std::mem::size_of::<Published>().next_multiple_of(std::mem::align_of::<Range>());
        let spans_at = (ranges_at + watched * std::mem::size_of::<Range>())
            .next_multiple_of(std::mem::align_of::<(u64, u64)>());
        (
            ranges_at,
            spans_at,
            spans_at + spans * std::mem::size_of::<(u64, u64)>(),
        )
    }

    /// A copy of `s` in fresh pages; null when the system has none.
    fn create(s: &Snapshot) -> *mut Published {
        let (ranges_at, spans_at, len) = Self::layout(s.watched.len(), s.spans.len());
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

    pub fn watched(&self) -> &[Range] {
        let (at, _, _) = Self::layout(self.watched, self.spans);
        // SAFETY: `create` wrote `watched` ranges at this offset of the
        // mapping this header starts, which lives as long as `self`.
        unsafe {
            std::slice::from_raw_parts(
                (self as *const Published).cast::<u8>().add(at).cast(),
                self.watched,
            )
        }
    }

    pub fn spans(&self) -> &[(u64, u64)] {
        let (_, at, _) = Self::layout(self.watched, self.spans);
        // SAFETY: as in `watched`, for the spans.
        unsafe {
            std::slice::from_raw_parts(
                (self as *const Published).cast::<u8>().add(at).cast(),
                self.spans,
            )
        }
    }

    /// Allocation-free: called from the signal handler.
    pub fn judge(&self, addr: u64) -> Verdict {
        judge(self.watched(), self.spans(), addr)
    }

    /// Where the first page the check protected at or above `at` starts
    /// (`u64::MAX`: none): the handler's copy of the stack stops there (a
    /// mapped array on this thread's stack, mapped by another thread).
    /// Allocation-free: called from the signal handler.
    pub fn protected_from(&self, at: u64) -> u64 {
        let spans = self.spans();
        let i = spans.partition_point(|s| s.1 <= at);
        spans.get(i).map_or(u64::MAX, |s| s.0.max(at))
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
    let new = Published::create(next);
    if new.is_null() {
        // No memory for it: the old one stays, a fault it does not know is
        // passed on as the program's.
        return;
    }
    let old = SNAPSHOT.swap(new, Ordering::SeqCst);
    if !old.is_null() {
        retired.push(Retired(old));
    }
    // A handler that enters after this read sees `new` (its increment and
    // load are ordered after the swap); one inside may hold any retired.
    if READERS.load(Ordering::SeqCst) == 0 {
        retired.clear();
    }
}

/// Runs `f` on the published snapshot, if any (from a wrapped call, not
/// the handler: the same reader protocol).
pub(crate) fn with_snapshot(f: impl FnOnce(&Published)) {
    READERS.fetch_add(1, Ordering::SeqCst);
    let snap = SNAPSHOT.load(Ordering::SeqCst);
    // SAFETY: a published snapshot is unmapped only while READERS is 0.
    if let Some(s) = unsafe { snap.as_ref() } {
        f(s);
    }
    READERS.fetch_sub(1, Ordering::SeqCst);
}

/// Opens the whole pages `lo..hi` (a wrapped call is about to hand them
/// to the system).
pub(crate) fn open_span(lo: u64, hi: u64) {
    protect(lo, hi.saturating_sub(lo), Prot::Rw);
}

/// Takes the faults recorded since the last call, oldest slot first, each
/// with the stack copy the handler took with it (valid for the call: the
/// slot is released after it).
pub(crate) fn drain(mut each: impl FnMut(Fault, &StackCopy)) {
    for slot in &SLOTS {
        if slot
            .state
            .compare_exchange(READY, WRITING, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            // SAFETY: we own the slot until it is EMPTY again (see Slot).
            let f = unsafe { *slot.fault.get() };
            // SAFETY: as above, for the slot's stack copy.
            let copy = unsafe { &*slot.stack.get() };
            each(f, copy);
            slot.state.store(EMPTY, Ordering::Release);
        }
    }
}

/// Sets the page size and registers [`claim`] with the collector's signal
/// handler, which gives it every SIGSEGV and SIGBUS first (and hands the
/// ones it does not claim on to the program's disposition).
pub(crate) fn install() {
    if INSTALLED.swap(true, Ordering::AcqRel) {
        return;
    }
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if page > 0 && (page as u64).is_power_of_two() {
        PAGE.store(page as u64, Ordering::Relaxed);
    }
    crate::signals::set_fault_hook(claim);
}

static INSTALLED: AtomicBool = AtomicBool::new(false);

/// Copies the interrupted code's registers and the stack words above its
/// stack pointer into `out`, which the caller owns: up to the thread's
/// stack end when this thread made it known ([`learn_stack_end`]), else
/// to the end of the stack pointer's page (always mapped), and never to
/// `limit` or past it (the first page the check protected above the stack
/// pointer). Leaves `out.words` 0 when there is no context.
/// Async-signal-safe: reads the ucontext and the thread's own stack,
/// writes only `out`.
pub(crate) fn capture(ctx: *mut libc::c_void, out: &mut StackCopy, limit: u64) {
    out.words = 0;
    let Some(regs) = registers(ctx) else { return };
    out.regs = regs;
    if regs.sp == 0 || regs.sp % 8 != 0 {
        return;
    }
    let page = PAGE.load(Ordering::Relaxed);
    let end = match STACK_END.try_with(Cell::get).unwrap_or(0) {
        e if e > regs.sp => e,
        _ => (regs.sp | (page - 1)) + 1,
    }
    .min(limit.max(regs.sp));
    let words = ((end - regs.sp) / 8).min(STACK_WORDS as u64) as usize;
    // SAFETY: sp..end is the interrupted thread's stack, mapped and
    // readable (above its stack pointer, below its end); `out.stack`
    // holds STACK_WORDS words.
    unsafe {
        std::ptr::copy_nonoverlapping(
            regs.sp as usize as *const u64,
            out.stack.as_mut_ptr(),
            words,
        );
    }
    out.words = words;
}

/// Learns where this thread's stack ends, for [`capture`]; once per
/// thread, outside the handler.
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

#[cfg(target_arch = "x86_64")]
fn registers(ctx: *mut libc::c_void) -> Option<Regs> {
    if ctx.is_null() {
        return None;
    }
    // SAFETY: the kernel passes a ucontext_t to an SA_SIGINFO handler.
    let uc = unsafe { &*(ctx as *const libc::ucontext_t) };
    let g = &uc.uc_mcontext.gregs;
    Some(Regs {
        pc: g[libc::REG_RIP as usize] as u64,
        sp: g[libc::REG_RSP as usize] as u64,
        fp: g[libc::REG_RBP as usize] as u64,
    })
}

/// The walk follows x86-64's call frame rules only.
#[cfg(not(target_arch = "x86_64"))]
fn registers(_ctx: *mut libc::c_void) -> Option<Regs> {
    None
}

#[cfg(target_arch = "x86_64")]
fn context(ctx: *mut libc::c_void) -> (u64, bool) {
    if ctx.is_null() {
        return (0, false);
    }
    // SAFETY: the kernel passes a ucontext_t to an SA_SIGINFO handler.
    let uc = unsafe { &*(ctx as *const libc::ucontext_t) };
    let rip = uc.uc_mcontext.gregs[libc::REG_RIP as usize] as u64;
    // Page-fault error code: bit 1 set for a write.
    let write = uc.uc_mcontext.gregs[libc::REG_ERR as usize] & 2 != 0;
    (rip, write)
}

#[cfg(target_arch = "aarch64")]
fn context(ctx: *mut libc::c_void) -> (u64, bool) {
    if ctx.is_null() {
        return (0, false);
    }
    // SAFETY: the kernel passes a ucontext_t to an SA_SIGINFO handler.
    let uc = unsafe { &*(ctx as *const libc::ucontext_t) };
    // The write bit (ESR WnR) lives in an extra context record; without
    // it every access counts as a read.
    (uc.uc_mcontext.pc, false)
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
fn context(_ctx: *mut libc::c_void) -> (u64, bool) {
    (0, false)
}

fn open_page(addr: u64) {
    let page = PAGE.load(Ordering::Relaxed);
    protect(addr & !(page - 1), page, Prot::Rw);
}

/// Gives `lo..lo+len` (whole pages) protection `prot`: only ever less
/// strict than what the check set there.
fn protect(lo: u64, len: u64, prot: Prot) {
    OPENED.fetch_add(1, Ordering::Relaxed);
    // SAFETY: pages the check protected (they were readable and writable
    // before); loosening them changes nothing else.
    unsafe {
        libc::mprotect(lo as usize as *mut libc::c_void, len as usize, prot.bits());
    }
}

/// Takes a SIGSEGV or SIGBUS that the check caused (an access to a page
/// it protected) and returns true; false for every other, which the
/// collector's handler passes on. Called from that handler: async-signal-
/// safe (atomics, `mprotect`, the fault ring, a raw `write`).
fn claim(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) -> bool {
    let started = crate::clock::now_ns();
    // Only the kernel's "no access to a mapped page" can be the check's
    // (not a raise, not an unmapped address).
    let addr = if info.is_null() || sig != libc::SIGSEGV {
        0
    } else {
        // SAFETY: the kernel's siginfo; si_addr is meaningful for its own
        // SIGSEGV, which si_code tells apart.
        unsafe {
            if (*info).si_code == SEGV_ACCERR {
                (*info).si_addr() as u64
            } else {
                0
            }
        }
    };
    let sp = registers(ctx).map_or(0, |r| r.sp);
    READERS.fetch_add(1, Ordering::SeqCst);
    let snap = SNAPSHOT.load(Ordering::SeqCst);
    // SAFETY: a published snapshot is unmapped only while READERS is 0.
    let (verdict, stack_limit) = unsafe { snap.as_ref() }.map_or((Verdict::NotOurs, 0), |s| {
        (s.judge(addr), s.protected_from(sp))
    });
    READERS.fetch_sub(1, Ordering::SeqCst);
    match verdict {
        Verdict::NotOurs => {
            if addr != 0 {
                say_not_ours(addr, context(ctx).0);
            }
            return false;
        }
        Verdict::OurPage => {
            shared_touched(addr & !(PAGE.load(Ordering::Relaxed) - 1));
            open_page(addr);
        }
        Verdict::Watched(range) => {
            FAULTS.fetch_add(1, Ordering::Relaxed);
            let (code_addr, write) = context(ctx);
            let inside = IN_CONSTRUCT.try_with(Cell::get).unwrap_or(0) > 0;
            if inside {
                RUNTIME_ACCESSES.fetch_add(1, Ordering::Relaxed);
                open_page(addr);
            } else {
                access_from(started, code_addr, addr, write, range, (ctx, stack_limit));
            }
        }
    }
    HANDLER_NS.fetch_add(
        crate::clock::now_ns().saturating_sub(started),
        Ordering::Relaxed,
    );
    true
}

/// A host access to a watched range, from the handler (`code_addr` the
/// faulting instruction) or from a wrapped call that hands the range to
/// the system (`code_addr` inside the call instruction): recorded for the
/// next construct boundary, and the range's pages opened as far as the
/// access needs. Async-signal-safe.
pub(crate) fn access(time: u64, code_addr: u64, addr: u64, write: bool, range: Range) {
    access_from(
        time,
        code_addr,
        addr,
        write,
        range,
        (std::ptr::null_mut(), 0),
    );
}

/// [`access`], from the handler: `ctx` its ucontext (null from a wrapped
/// call), whose registers and stack below the limit are kept for the
/// walk.
fn access_from(
    time: u64,
    code_addr: u64,
    addr: u64,
    write: bool,
    range: Range,
    ctx: (*mut libc::c_void, u64),
) {
    let page = PAGE.load(Ordering::Relaxed);
    if write || range.is_stale() {
        // A stale copy is watched page by page (each read is one); a
        // write needs its page writable.
        open_page(addr);
    } else {
        // A read of a download: it is read, whatever else is; what stays
        // watched is a write to a copy the device shares.
        let (lo, hi) = super::table::page_span(range.start, range.bytes, page);
        let after = Range {
            unread: None,
            ..range
        };
        protect(lo, hi - lo, after.prot());
    }
    if write && range.is_stale() {
        WRITES.fetch_add(1, Ordering::Relaxed);
    }
    if !(write && range.is_stale()) || range.unread.is_some() {
        // After the page is open: a read's bytes are saved.
        record(time, code_addr, addr, write, range, ctx);
    }
}

fn record(
    time: u64,
    code_addr: u64,
    addr: u64,
    write: bool,
    range: Range,
    (ctx, stack_limit): (*mut libc::c_void, u64),
) {
    let page = PAGE.load(Ordering::Relaxed);
    let start = NEXT_SLOT.fetch_add(1, Ordering::Relaxed);
    for k in 0..RING {
        let slot = &SLOTS[(start + k) % RING];
        if slot
            .state
            .compare_exchange(EMPTY, WRITING, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            continue;
        }
        let (at, len) = save_window(&range, addr, page, SAVED as u64);
        let mut f = Fault {
            time,
            // SAFETY: gettid has no preconditions; async-signal-safe.
            thread: unsafe { libc::gettid() } as u32,
            code_addr,
            host_addr: addr,
            range,
            write,
            saved_at: at,
            saved_len: len as usize,
            saved: [0; SAVED],
            frames: [0; FRAMES],
            nframes: 0,
        };
        if !write {
            // SAFETY: at..at+len lies in the page `access` opened (at
            // least readable) before recording; save_window keeps it there.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    at as usize as *const u8,
                    f.saved.as_mut_ptr(),
                    len as usize,
                );
            }
        }
        // SAFETY: we own the slot (EMPTY -> WRITING above).
        unsafe { slot.fault.get().write(f) };
        // SAFETY: as above, for its stack copy; written in place.
        capture(ctx, unsafe { &mut *slot.stack.get() }, stack_limit);
        slot.state.store(READY, Ordering::Release);
        return;
    }
    RING_FULL.fetch_add(1, Ordering::Relaxed);
}

/// One line on stderr for a fault the check passes on while it runs: the
/// program's own (or one the check cannot explain). Async-signal-safe.
fn say_not_ours(addr: u64, code: u64) {
    let mut buf = [0u8; 160];
    let mut n = 0;
    let mut put = |b: &[u8]| {
        for &c in b {
            if n < buf.len() {
                buf[n] = c;
                n += 1;
            }
        }
    };
    put(b"accprof: coherence check: SIGSEGV at ");
    put(&hex(addr));
    put(b" (instruction ");
    put(&hex(code));
    put(b") is not on a page the check watches: passed on to the program\n");
    // Through the notes' one raw writer: async-signal-safe, and a closed
    // pipe on stderr raises no SIGPIPE of ours in the program.
    crate::note::write_raw(&buf[..n]);
}

fn hex(v: u64) -> [u8; 18] {
    let mut out = [b'0'; 18];
    out[1] = b'x';
    for i in 0..16 {
        let d = ((v >> ((15 - i) * 4)) & 0xf) as u8;
        out[2 + i] = if d < 10 { b'0' + d } else { b'a' + d - 10 };
    }
    out
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
    use super::Published;

    /// A shared page touched twice is hot, one touched once is not yet;
    /// the count is per page.
    #[test]
    fn a_shared_page_touched_again_is_hot() {
        // Pages no other test touches.
        let (a, b) = (0x7e57_0000_0000u64, 0x7e57_0000_1000u64);
        super::shared_touched(a);
        super::shared_touched(b);
        assert!(!super::hot_pages(2).contains(&a));
        super::shared_touched(a);
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
        let p = Published::create(&snap);
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
