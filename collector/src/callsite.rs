//! Where in the application a construct came from, when the runtime does
//! not say (GCC's libgomp leaves src_file and line_no empty).
//!
//! At a construct's start event we walk the stack with the platform unwinder
//! (`_Unwind_Backtrace`, driven by .eh_frame, so it works without frame
//! pointers) past the frames of the collector and of runtime libraries
//! (libgomp and its plugins, the CUDA driver, libc, ...). The first other
//! frame's return address is the application's call into the runtime entry
//! point (GOACC_parallel_keyed, GOACC_data_start, GOACC_update, ...). It is
//! stored as module + offset; symbolizing to file:line happens offline in
//! the analyzer, never in the observed program.
//!
//! The first call through each call site also keeps the application frames
//! above it (up to [`CALLERS`]: the functions that called the construct's
//! function), so the analyzer can find a loop in a caller that repeats the
//! construct. They come from the same unwind, walked a few frames further.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{c_int, c_void, CStr};
use std::sync::{Mutex, RwLock};

use accprof_trace::{
    CallChain, CallSite, CallSiteId, Frame as TraceFrame, Module, ModuleId, Record,
};

use crate::fasthash::AddrMap;
use crate::sink;

/// Frames walked at most before giving up.
const MAX_FRAMES: usize = 32;

/// Application frames kept above a call site's own frame.
const CALLERS: usize = 3;

struct LoadedModule {
    id: ModuleId,
    path: String,
    base: u64,
    /// Absolute [start, end) of executable segments.
    text: Vec<(u64, u64)>,
    build_id: Vec<u8>,
    /// Frames here belong to the runtime or the collector: skip them.
    runtime: bool,
    /// Module record already queued for the trace.
    defined: bool,
}

static MODULES: RwLock<Vec<LoadedModule>> = RwLock::new(Vec::new());
static CALL_SITES: Mutex<Option<HashMap<u64, CallSiteId>>> = Mutex::new(None);
static NEXT_MODULE: Mutex<u32> = Mutex::new(1);
static NEXT_CALL_SITE: Mutex<u32> = Mutex::new(1);

extern "C" {
    // From libgcc_s (linked by every Rust program on linux-gnu).
    fn _Unwind_Backtrace(
        trace: extern "C" fn(ctx: *mut c_void, arg: *mut c_void) -> c_int,
        arg: *mut c_void,
    ) -> c_int;
    fn _Unwind_GetIP(ctx: *mut c_void) -> usize;
    fn _Unwind_GetCFA(ctx: *mut c_void) -> usize;
}

const URC_NO_REASON: c_int = 0;
const URC_END_OF_STACK: c_int = 5;

/// Library file names whose frames are never the application's.
fn is_runtime_library(path: &str, own_path: &str) -> bool {
    if !own_path.is_empty() && path == own_path {
        return true;
    }
    let name = path.rsplit('/').next().unwrap_or(path);
    const PREFIXES: [&str; 17] = [
        "libgomp",
        "libacc",
        "libnvhpc",
        "libnvc",
        "libnvomp",
        "libpgc",
        "libcuda",
        "libcupti",
        "libc.so",
        "libc-",
        "libpthread",
        "ld-linux",
        "libgcc_s",
        "libstdc++",
        "libgfortran",
        // MPI's Fortran bindings (libmpi_mpifh, libmpi_usempif08,
        // libmpifort) call the C entries the collector wraps.
        "libmpi",
        "libaccprof",
    ];
    PREFIXES.iter().any(|p| name.starts_with(p))
}

/// Path of the loaded object that holds `addr` (as the loader names it).
pub(crate) fn object_of(addr: *const c_void) -> Option<String> {
    // SAFETY: Dl_info is plain data, valid zeroed; dladdr fills it for an
    // address inside a loaded object and returns 0 otherwise. dli_fname,
    // when set, is a NUL-terminated string owned by the loader for as long
    // as the object stays loaded.
    unsafe {
        let mut info: libc::Dl_info = std::mem::zeroed();
        if libc::dladdr(addr, &mut info) == 0 || info.dli_fname.is_null() {
            return None;
        }
        Some(
            CStr::from_ptr(info.dli_fname)
                .to_string_lossy()
                .into_owned(),
        )
    }
}

fn own_path() -> String {
    object_of(own_path as *const c_void).unwrap_or_default()
}

/// A loaded object as dl_iterate_phdr shows it: path, load bias,
/// executable ranges, build id.
type FoundObject = (String, u64, Vec<(u64, u64)>, Vec<u8>);

struct Scan {
    own: String,
    found: Vec<FoundObject>,
}

unsafe extern "C" fn phdr_callback(
    info: *mut libc::dl_phdr_info,
    _size: libc::size_t,
    data: *mut c_void,
) -> c_int {
    // SAFETY: the loader passes a valid dl_phdr_info for the duration of the
    // call, and `data` is the &mut Scan we passed to dl_iterate_phdr.
    let (info, scan) = unsafe { (&*info, &mut *(data as *mut Scan)) };
    let base = info.dlpi_addr;
    let name = if info.dlpi_name.is_null() {
        String::new()
    } else {
        // SAFETY: dlpi_name is a NUL-terminated string owned by the loader.
        unsafe { CStr::from_ptr(info.dlpi_name) }
            .to_string_lossy()
            .into_owned()
    };
    let path = if name.is_empty() {
        std::fs::read_link("/proc/self/exe")
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default()
    } else {
        name
    };
    let mut text = Vec::new();
    let mut build_id = Vec::new();
    for i in 0..info.dlpi_phnum as usize {
        // SAFETY: dlpi_phdr points to dlpi_phnum program headers.
        let ph = unsafe { &*info.dlpi_phdr.add(i) };
        if ph.p_type == libc::PT_LOAD && ph.p_flags & libc::PF_X != 0 {
            text.push((base + ph.p_vaddr, base + ph.p_vaddr + ph.p_memsz));
        } else if ph.p_type == libc::PT_NOTE && build_id.is_empty() {
            // SAFETY: a PT_NOTE segment of a loaded object is mapped and
            // readable for p_memsz bytes at base + p_vaddr.
            let notes = unsafe {
                std::slice::from_raw_parts((base + ph.p_vaddr) as *const u8, ph.p_memsz as usize)
            };
            build_id = find_build_id(notes).unwrap_or_default();
        }
    }
    if !path.is_empty() && !text.is_empty() {
        scan.found.push((path, base, text, build_id));
    }
    0
}

/// Finds the GNU build id in a run of ELF notes.
fn find_build_id(mut notes: &[u8]) -> Option<Vec<u8>> {
    const NT_GNU_BUILD_ID: u32 = 3;
    let word = |b: &[u8]| -> Option<u32> { Some(u32::from_ne_bytes(b.get(..4)?.try_into().ok()?)) };
    let align4 = |n: usize| (n + 3) & !3;
    while notes.len() >= 12 {
        let namesz = word(&notes[0..])? as usize;
        let descsz = word(&notes[4..])? as usize;
        let kind = word(&notes[8..])?;
        let name_end = 12 + align4(namesz);
        let desc_end = name_end + align4(descsz);
        if desc_end > notes.len() {
            return None;
        }
        if kind == NT_GNU_BUILD_ID && notes.get(12..12 + namesz) == Some(b"GNU\0") {
            return Some(notes[name_end..name_end + descsz].to_vec());
        }
        notes = &notes[desc_end..];
    }
    None
}

/// Re-reads the loaded objects, adding any not seen yet.
fn refresh() {
    let mut scan = Scan {
        own: own_path(),
        found: Vec::new(),
    };
    // SAFETY: the callback only reads the loader's structures during the call
    // and writes into `scan`, which outlives it.
    unsafe {
        libc::dl_iterate_phdr(Some(phdr_callback), (&mut scan as *mut Scan).cast());
    }
    let Ok(mut mods) = MODULES.write() else {
        return;
    };
    let Ok(mut next) = NEXT_MODULE.lock() else {
        return;
    };
    for (path, base, text, build_id) in scan.found {
        if mods.iter().any(|m| m.base == base && m.path == path) {
            continue;
        }
        let runtime = is_runtime_library(&path, &scan.own);
        mods.push(LoadedModule {
            id: ModuleId(*next),
            path,
            base,
            text,
            build_id,
            runtime,
            defined: false,
        });
        *next += 1;
    }
}

/// Reads the module table once at start.
pub fn init() {
    refresh();
}

/// What a frame's address belongs to.
enum Owner {
    Runtime,
    App(ModuleId, u64),
    Unknown,
}

fn owner_of(ip: u64) -> Owner {
    let Ok(mods) = MODULES.read() else {
        return Owner::Unknown;
    };
    for m in mods.iter() {
        if m.text.iter().any(|&(s, e)| ip >= s && ip < e) {
            return if m.runtime {
                Owner::Runtime
            } else {
                Owner::App(m.id, ip - m.base)
            };
        }
    }
    Owner::Unknown
}

/// One frame as the unwinder saw it.
#[derive(Clone, Copy)]
struct Frame {
    ip: u64,
    cfa: u64,
}

struct Walk {
    frames: Vec<Frame>,
    /// Index of the first application frame in `frames`.
    app: Option<usize>,
    unknown: bool,
    /// Return addresses of the application frames right above the first
    /// one, innermost first, up to [`CALLERS`].
    callers: Vec<u64>,
}

extern "C" fn walk_frame(ctx: *mut c_void, arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the &mut Walk passed to _Unwind_Backtrace below and
    // `ctx` is the unwinder's live context for this frame.
    let (walk, ip, cfa) = unsafe {
        (
            &mut *(arg as *mut Walk),
            _Unwind_GetIP(ctx) as u64,
            _Unwind_GetCFA(ctx) as u64,
        )
    };
    if ip == 0 || walk.frames.len() >= MAX_FRAMES {
        return URC_END_OF_STACK;
    }
    if walk.app.is_some() {
        // Above the call site: the application's callers, until a frame
        // that is not the application's (libc's start, a thread start).
        if !matches!(owner_of(ip), Owner::App(..)) {
            return URC_END_OF_STACK;
        }
        walk.callers.push(ip);
        return if walk.callers.len() >= CALLERS {
            URC_END_OF_STACK
        } else {
            URC_NO_REASON
        };
    }
    walk.frames.push(Frame { ip, cfa });
    match owner_of(ip) {
        Owner::Runtime => URC_NO_REASON,
        Owner::App(..) => {
            walk.app = Some(walk.frames.len() - 1);
            URC_NO_REASON
        }
        Owner::Unknown => {
            // A module loaded after the last scan (dlopen): stop here and let
            // the caller refresh the table and classify it.
            walk.unknown = true;
            URC_END_OF_STACK
        }
    }
}

fn unwind() -> Walk {
    let mut walk = Walk {
        frames: Vec::with_capacity(MAX_FRAMES),
        app: None,
        unknown: false,
        callers: Vec::with_capacity(CALLERS),
    };
    // SAFETY: walk_frame matches the callback signature and only touches
    // `walk`, which outlives the call.
    unsafe { _Unwind_Backtrace(walk_frame, (&mut walk as *mut Walk).cast()) };
    walk
}

/// The stack layout of one runtime call chain, relative to an anchor in
/// the collector's outermost frame: where each runtime frame's return
/// address sits and what it must be, and where the application's return
/// address sits. The layout of a given chain of compiled frames never
/// changes, so once learned by a full unwind it is checked (every runtime
/// return address compared exactly) and read in a few loads.
#[derive(Clone)]
struct Chain {
    runtime: Vec<(u64, u64)>,
    app_slot: u64,
}

struct ThreadCache {
    chains: Vec<Chain>,
    /// Highest stack address of this thread: reads never go past it.
    stack_end: u64,
    sites: AddrMap<u64, CallSiteId>,
}

/// Chains remembered per thread, at most.
const MAX_CHAINS: usize = 32;

extern "C" {
    /// glibc: the main thread's stack address at program start (argc's
    /// slot); every frame of the main thread lies below it.
    static __libc_stack_end: *mut c_void;
}

fn stack_end() -> u64 {
    // SAFETY: getpid/gettid have no preconditions.
    let main_thread = unsafe { libc::getpid() == libc::gettid() };
    if main_thread {
        // pthread_getattr_np would parse /proc/self/maps for the main
        // thread; glibc's start-up stack address is a tighter bound anyway.
        // SAFETY: a glibc data symbol written once before main().
        return unsafe { __libc_stack_end } as u64;
    }
    // SAFETY: pthread_getattr_np fills an attr we own and destroy; the
    // stack address and size it reports describe this thread's stack.
    unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        if libc::pthread_getattr_np(libc::pthread_self(), &mut attr) != 0 {
            return 0;
        }
        let mut addr: *mut c_void = std::ptr::null_mut();
        let mut size: libc::size_t = 0;
        let ok = libc::pthread_attr_getstack(&attr, &mut addr, &mut size) == 0;
        libc::pthread_attr_destroy(&mut attr);
        if ok {
            addr as u64 + size as u64
        } else {
            0
        }
    }
}

thread_local! {
    static CACHE: RefCell<Option<ThreadCache>> = const { RefCell::new(None) };
}

/// Reads one stack word at anchor + off, if it lies below the stack's end.
fn read_slot(anchor: u64, off: u64, stack_end: u64) -> Option<u64> {
    let addr = anchor.checked_add(off)?;
    if addr % 8 != 0 || addr.checked_add(8)? > stack_end {
        return None;
    }
    // SAFETY: addr lies between a live local of this thread's current call
    // (the anchor) and the end of this thread's stack, so it is mapped and
    // readable; it is 8-aligned.
    Some(unsafe { std::ptr::read_volatile(addr as *const u64) })
}

fn cached_app_frame(cache: &ThreadCache, anchor: u64) -> Option<u64> {
    'chains: for chain in &cache.chains {
        for &(off, want) in &chain.runtime {
            if read_slot(anchor, off, cache.stack_end) != Some(want) {
                continue 'chains;
            }
        }
        return read_slot(anchor, chain.app_slot, cache.stack_end);
    }
    None
}

/// What a full unwind found: the application's call site, the layout of
/// the runtime chain below it relative to `anchor` (when it can be reused),
/// and the application's callers above it.
struct Learned {
    ip: Option<u64>,
    chain: Option<Chain>,
    callers: Vec<u64>,
}

/// A full unwind, past modules loaded since the last scan.
fn full_unwind() -> Option<Walk> {
    let mut walk = unwind();
    if walk.unknown {
        refresh();
        walk = unwind();
        if walk.unknown {
            return None;
        }
    }
    Some(walk)
}

/// The return address into the application of the call this thread is
/// in (a full unwind: for the rare call that needs it).
pub(crate) fn app_return_address() -> Option<u64> {
    let walk = full_unwind()?;
    let app = walk.app?;
    Some(walk.frames.get(app)?.ip)
}

/// Full unwind; learns the chain's layout relative to `anchor`.
fn learn(anchor: u64) -> Learned {
    let nothing = Learned {
        ip: None,
        chain: None,
        callers: Vec::new(),
    };
    let Some(walk) = full_unwind() else {
        return nothing;
    };
    let Some(app) = walk.app else {
        return nothing;
    };
    let f = &walk.frames;
    // libgcc hands each frame's IP with the CFA of the frame that returns
    // there, so that IP is stored just below that CFA.
    let slot = |i: usize| f[i].cfa.checked_sub(8)?.checked_sub(anchor);
    // Only slots past the anchor describe the runtime chain: the
    // collector's own frames below it change with inlining and are not
    // checked.
    let runtime: Vec<(u64, u64)> = (0..app)
        .filter(|&i| matches!(owner_of(f[i].ip), Owner::Runtime))
        .filter_map(|i| Some((slot(i)?, f[i].ip)))
        .collect();
    let chain = slot(app).map(|app_slot| Chain { runtime, app_slot });
    // Only a chain with at least one checked runtime frame is safe to reuse.
    let chain = chain.filter(|c| !c.runtime.is_empty());
    Learned {
        ip: Some(f[app].ip),
        chain,
        callers: walk.callers,
    }
}

/// The application call site of the current runtime call, interned.
/// `anchor` is the address of a local in the collector's outermost frame
/// (the acc_prof callback), so offsets from it are fixed per call chain.
pub fn capture(anchor: usize) -> Option<CallSiteId> {
    let anchor = anchor as u64;
    CACHE
        .try_with(|c| {
            let mut c = c.try_borrow_mut().ok()?;
            let cache = c.get_or_insert_with(|| ThreadCache {
                chains: Vec::new(),
                stack_end: stack_end(),
                sites: AddrMap::default(),
            });
            let (ip, callers) = match cached_app_frame(cache, anchor) {
                Some(ip) => (ip, None),
                None => {
                    let learned = learn(anchor);
                    if let Some(chain) = learned.chain {
                        if cache.chains.len() < MAX_CHAINS && cache.stack_end != 0 {
                            cache.chains.push(chain);
                        }
                    }
                    (learned.ip?, Some(learned.callers))
                }
            };
            if let Some(id) = cache.sites.get(&ip) {
                return Some(*id);
            }
            // A site this thread has not seen: its callers come from the
            // unwind that found it, or from one more (once per site).
            let callers = match callers {
                Some(c) => c,
                None => full_unwind().map(|w| w.callers).unwrap_or_default(),
            };
            let id = intern(ip, &callers)?;
            cache.sites.insert(ip, id);
            Some(id)
        })
        .ok()
        .flatten()
}

/// Who made a call, given the call's return address.
pub(crate) enum Caller {
    /// The application, at this interned call site (None when the address
    /// could not be interned).
    App(Option<CallSiteId>),
    /// The runtime, a runtime library or the collector itself.
    Runtime,
}

/// Classifies and interns the return address of a call into the collector
/// (an interposed API routine), cached per thread like [`capture`]'s sites.
pub(crate) fn caller(return_address: u64) -> Caller {
    let cached = CACHE
        .try_with(|c| {
            let c = c.try_borrow().ok()?;
            c.as_ref()?.sites.get(&return_address).copied()
        })
        .ok()
        .flatten();
    if let Some(id) = cached {
        return Caller::App(Some(id));
    }
    let mut owner = owner_of(return_address);
    if matches!(owner, Owner::Unknown) {
        // A module loaded after the last scan (dlopen).
        refresh();
        owner = owner_of(return_address);
    }
    match owner {
        Owner::Runtime => Caller::Runtime,
        // Code outside every module (generated at run time): no site.
        Owner::Unknown => Caller::App(None),
        Owner::App(..) => {
            let id = intern(return_address, &[]);
            if let Some(id) = id {
                let _ = CACHE.try_with(|c| {
                    if let Ok(mut c) = c.try_borrow_mut() {
                        c.get_or_insert_with(|| ThreadCache {
                            chains: Vec::new(),
                            stack_end: stack_end(),
                            sites: AddrMap::default(),
                        })
                        .sites
                        .insert(return_address, id);
                    }
                });
            }
            Caller::App(id)
        }
    }
}

/// The interned id of the call site at `ip`, defined (with `callers`, the
/// return addresses above it) the first time any thread meets it.
fn intern(ip: u64, callers: &[u64]) -> Option<CallSiteId> {
    let Owner::App(module, offset) = owner_of(ip) else {
        return None;
    };
    let mut sites = CALL_SITES.lock().ok()?;
    let sites = sites.get_or_insert_with(HashMap::new);
    if let Some(id) = sites.get(&ip) {
        return Some(*id);
    }
    define_module(module);
    let id = {
        let mut next = NEXT_CALL_SITE.lock().ok()?;
        let id = CallSiteId(*next);
        *next += 1;
        id
    };
    sites.insert(ip, id);
    sink::define(Record::CallSite(CallSite {
        id,
        module,
        return_offset: offset,
    }));
    let frames: Vec<TraceFrame> = callers
        .iter()
        .filter_map(|&ip| match owner_of(ip) {
            Owner::App(module, return_offset) => {
                define_module(module);
                Some(TraceFrame {
                    module,
                    return_offset,
                })
            }
            _ => None,
        })
        .collect();
    if !frames.is_empty() {
        sink::define(Record::CallChain(CallChain {
            site: id,
            callers: frames,
        }));
    }
    Some(id)
}

fn define_module(id: ModuleId) {
    let Ok(mut mods) = MODULES.write() else {
        return;
    };
    if let Some(m) = mods.iter_mut().find(|m| m.id == id && !m.defined) {
        m.defined = true;
        let (start, end) = m.text.first().copied().unwrap_or((m.base, m.base));
        sink::define(Record::Module(Module {
            id: m.id,
            path: m.path.clone(),
            build_id: m.build_id.clone(),
            base: m.base,
            text_start: start - m.base,
            text_end: end - m.base,
        }));
    }
}

/// Defines the module holding the code address `ip` in the trace, so
/// the analyzer can symbolize it (the coherence check's faulting
/// instructions); false when no loaded module holds it.
pub(crate) fn define_module_of(ip: u64) -> bool {
    let mut owner = owner_of(ip);
    if matches!(owner, Owner::Unknown) {
        refresh();
        owner = owner_of(ip);
    }
    match owner {
        Owner::App(module, _) => {
            define_module(module);
            true
        }
        _ => false,
    }
}

/// The module (defined in the trace) and offset of the code address `ip`,
/// whatever module holds it, the runtime's and libc's included: a frame
/// of the walk out of a library (see `coherence::walk`).
pub(crate) fn frame_of(ip: u64) -> Option<TraceFrame> {
    let find = || {
        let mods = MODULES.read().ok()?;
        mods.iter()
            .find(|m| m.text.iter().any(|&(s, e)| ip >= s && ip < e))
            .map(|m| (m.id, ip - m.base))
    };
    let (module, return_offset) = find().or_else(|| {
        refresh();
        find()
    })?;
    define_module(module);
    Some(TraceFrame {
        module,
        return_offset,
    })
}

/// After fork the child's trace must define modules and call sites again.
pub fn reset_after_fork() {
    if let Ok(mut mods) = MODULES.try_write() {
        for m in mods.iter_mut() {
            m.defined = false;
        }
    }
    if let Ok(mut s) = CALL_SITES.try_lock() {
        *s = None;
    }
    let _ = CACHE.try_with(|c| {
        if let Ok(mut c) = c.try_borrow_mut() {
            *c = None;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_libraries_are_recognised() {
        assert!(is_runtime_library(
            "/usr/lib/x86_64-linux-gnu/libgomp.so.1",
            ""
        ));
        assert!(is_runtime_library("/usr/lib/libgomp-plugin-nvptx.so.1", ""));
        assert!(is_runtime_library("/lib/x86_64-linux-gnu/libc.so.6", ""));
        assert!(is_runtime_library("/x/libaccprof.so", "/x/libaccprof.so"));
        assert!(!is_runtime_library("/home/u/laplace_bad", ""));
        assert!(!is_runtime_library("/home/u/libsolver.so", ""));
    }

    #[test]
    fn build_id_is_read_from_notes() {
        let mut notes = Vec::new();
        // An unrelated note first, then the build id.
        notes.extend_from_slice(&4u32.to_ne_bytes());
        notes.extend_from_slice(&4u32.to_ne_bytes());
        notes.extend_from_slice(&1u32.to_ne_bytes());
        notes.extend_from_slice(b"GNU\0");
        notes.extend_from_slice(&[0, 0, 0, 0]);
        notes.extend_from_slice(&4u32.to_ne_bytes());
        notes.extend_from_slice(&3u32.to_ne_bytes());
        notes.extend_from_slice(&3u32.to_ne_bytes());
        notes.extend_from_slice(b"GNU\0");
        notes.extend_from_slice(&[0xab, 0xcd, 0xef, 0]);
        assert_eq!(find_build_id(&notes), Some(vec![0xab, 0xcd, 0xef]));
        assert_eq!(find_build_id(&notes[..10]), None);
    }

    #[test]
    fn the_collectors_own_frames_are_skipped() {
        init();
        // The module holding the collector's code (here: the test binary)
        // is never taken for the application.
        let ip = the_collectors_own_frames_are_skipped as *const () as u64;
        assert!(matches!(owner_of(ip), Owner::Runtime));
    }
}
