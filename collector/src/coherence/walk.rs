//! The walk out of the code that made a watched access, on the copy the
//! fault handler saved (registers and a window of stack words), at the
//! next construct boundary: never in the handler.
//!
//! An access made inside a shared library (libgfortran's formatted I/O
//! reading `p(5)` for `print *`, libc's memcpy, fwrite or printf) faults
//! in the library's code, which says nothing about the program's
//! statement. The return addresses above it do: the walk finds them with
//! the call frame information (`.eh_frame`, through the `.eh_frame_hdr`
//! search table) of the modules as they are loaded in this process, so it
//! needs no frame pointers (libc and libgfortran are built without them)
//! and no files on disk. It is done here rather than by the analyzer
//! because the libraries on the machine that analyzes a trace are seldom
//! the ones the program ran with (a trace recorded on a GPU node and read
//! on a laptop): the collector has the very bytes that ran.
//!
//! The walk only reads the saved copy: a rule that needs a word outside it
//! (or a register the handler did not save) ends the walk where it is.

use std::ffi::{c_int, c_void};

use gimli::{
    BaseAddresses, CfaRule, EhFrame, EhFrameHdr, NativeEndian, Pointer, Register, RegisterRule,
    UnwindContext, UnwindSection, X86_64,
};

use super::fault::StackCopy;

/// A loaded object's unwind tables, as the loader mapped them.
struct Object {
    /// The main executable (the loader's first object).
    main: bool,
    /// Address and bytes of `.eh_frame_hdr`.
    hdr: (u64, &'static [u8]),
    /// The end of the loaded segment that holds `.eh_frame`: the bound of
    /// its bytes (the header gives only where it starts).
    segments: Vec<(u64, u64)>,
}

struct Find {
    pc: u64,
    index: usize,
    found: Option<Object>,
}

unsafe extern "C" fn find_object(
    info: *mut libc::dl_phdr_info,
    _size: libc::size_t,
    data: *mut c_void,
) -> c_int {
    // SAFETY: the loader passes a valid dl_phdr_info for the duration of
    // the call; `data` is the &mut Find that `object_of` passed.
    let (info, find) = unsafe { (&*info, &mut *(data as *mut Find)) };
    let index = find.index;
    find.index += 1;
    let base = info.dlpi_addr;
    let mut holds = false;
    let mut hdr = None;
    let mut segments = Vec::new();
    for i in 0..info.dlpi_phnum as usize {
        // SAFETY: dlpi_phdr points to dlpi_phnum program headers.
        let ph = unsafe { &*info.dlpi_phdr.add(i) };
        let (lo, hi) = (base + ph.p_vaddr, base + ph.p_vaddr + ph.p_memsz);
        if ph.p_type == libc::PT_LOAD {
            segments.push((lo, hi));
            if ph.p_flags & libc::PF_X != 0 && find.pc >= lo && find.pc < hi {
                holds = true;
            }
        } else if ph.p_type == libc::PT_GNU_EH_FRAME {
            hdr = Some((lo, ph.p_memsz as usize));
        }
    }
    if !holds {
        return 0;
    }
    if let Some((at, len)) = hdr {
        find.found = Some(Object {
            main: index == 0,
            // SAFETY: a PT_GNU_EH_FRAME segment of a loaded object is
            // mapped and readable for p_memsz bytes; the object stays
            // loaded while the program runs the code it holds.
            hdr: (at, unsafe {
                std::slice::from_raw_parts(at as usize as *const u8, len)
            }),
            segments,
        });
    }
    1
}

/// The loaded object whose code holds `pc`, with its unwind tables.
fn object_of(pc: u64) -> Option<Object> {
    let mut find = Find {
        pc,
        index: 0,
        found: None,
    };
    // SAFETY: the callback reads the loader's structures during the call
    // and writes only into `find`, which outlives it.
    unsafe {
        libc::dl_iterate_phdr(Some(find_object), (&mut find as *mut Find).cast());
    }
    find.found
}

/// Whether `pc` is code of the main executable (its statements are the
/// program's: no walk is needed).
pub(crate) fn in_main_executable(pc: u64) -> bool {
    object_of(pc).is_some_and(|o| o.main)
}

/// The registers the walk follows, at one frame.
#[derive(Clone, Copy, Debug)]
struct Frame {
    pc: u64,
    sp: u64,
    fp: u64,
}

/// The return addresses above the instruction the copy was taken at,
/// innermost first, into `out`; how many were found. Stops at the first
/// frame of the main executable (the program's own code: its callers are
/// not needed), at a frame without unwind information, or where a rule
/// asks for a word outside the copy.
pub(crate) fn walk(copy: &StackCopy, out: &mut [u64]) -> usize {
    let words = &copy.stack[..copy.words.min(copy.stack.len())];
    let read = |addr: u64| -> Option<u64> {
        let off = addr.checked_sub(copy.regs.sp)?;
        if off % 8 != 0 {
            return None;
        }
        words.get(usize::try_from(off / 8).ok()?).copied()
    };
    let mut ctx = UnwindContext::new();
    let mut frame = Frame {
        pc: copy.regs.pc,
        sp: copy.regs.sp,
        fp: copy.regs.fp,
    };
    let mut n = 0;
    let mut first = true;
    while n < out.len() {
        // A return address is looked up at the call instruction's last
        // byte (the call may be a function's last instruction).
        let lookup = if first { frame.pc } else { frame.pc - 1 };
        let Some(obj) = object_of(lookup) else { break };
        if obj.main && !first {
            break;
        }
        let Some(next) = step(&obj, lookup, frame, &mut ctx, &read) else {
            break;
        };
        if next.pc == 0 || next.sp <= frame.sp {
            break;
        }
        out[n] = next.pc;
        n += 1;
        frame = next;
        first = false;
    }
    n
}

/// The caller's registers, from the row of `obj`'s CFI for `lookup`.
fn step(
    obj: &Object,
    lookup: u64,
    at: Frame,
    ctx: &mut UnwindContext<usize>,
    read: &dyn Fn(u64) -> Option<u64>,
) -> Option<Frame> {
    let (hdr_at, hdr_bytes) = obj.hdr;
    let bases = BaseAddresses::default().set_eh_frame_hdr(hdr_at);
    let parsed = EhFrameHdr::new(hdr_bytes, NativeEndian)
        .parse(&bases, 8)
        .ok()?;
    let frame_at = match parsed.eh_frame_ptr() {
        Pointer::Direct(a) => a,
        Pointer::Indirect(_) => return None,
    };
    let end = obj
        .segments
        .iter()
        .find(|&&(lo, hi)| frame_at >= lo && frame_at < hi)?
        .1;
    // SAFETY: `frame_at..end` lies in a loaded segment of the object (its
    // PT_LOAD), mapped and readable while the object is loaded.
    let frame_bytes = unsafe {
        std::slice::from_raw_parts(frame_at as usize as *const u8, (end - frame_at) as usize)
    };
    let eh_frame = EhFrame::new(frame_bytes, NativeEndian);
    let bases = bases.set_eh_frame(frame_at);
    let table = parsed.table()?;
    let row = table
        .unwind_info_for_address(&eh_frame, &bases, ctx, lookup, EhFrame::cie_from_offset)
        .ok()?;
    let value = |r: Register| -> Option<u64> {
        match r {
            X86_64::RSP => Some(at.sp),
            X86_64::RBP => Some(at.fp),
            _ => None,
        }
    };
    let cfa = match row.cfa() {
        CfaRule::RegisterAndOffset { register, offset } => {
            value(*register)?.wrapping_add(*offset as u64)
        }
        CfaRule::Expression(_) => return None,
    };
    let pc = match row.register(X86_64::RA)? {
        RegisterRule::Offset(o) => read(cfa.wrapping_add(o as u64))?,
        _ => return None,
    };
    let fp = match row.register(X86_64::RBP) {
        None | Some(RegisterRule::Undefined | RegisterRule::SameValue) => at.fp,
        Some(RegisterRule::Offset(o)) => read(cfa.wrapping_add(o as u64))?,
        Some(RegisterRule::ValOffset(o)) => cfa.wrapping_add(o as u64),
        Some(RegisterRule::Register(r)) => value(r)?,
        // A rule the copy cannot follow: the frame pointer is unknown,
        // which only matters to a caller whose CFA is rbp-based.
        Some(_) => 0,
    };
    Some(Frame { pc, sp: cfa, fp })
}

#[cfg(test)]
mod tests {
    //! The walk on real code: shared objects built here from
    //! collector/tests/walk (C calling memcpy, fwrite and fprintf; Fortran
    //! `print *`) read a protected page inside libc or libgfortran; a
    //! SIGSEGV handler saves the registers and stack with the check's own
    //! [`capture`](super::super::fault::capture), opens the page and
    //! returns; the walk on that copy must name the source line that called
    //! into the library.

    use std::cell::UnsafeCell;
    use std::ffi::{c_char, c_void, CStr, CString};
    use std::path::{Path, PathBuf};
    use std::process::Command;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::super::fault::{self, StackCopy};
    use super::walk;

    struct Saved(UnsafeCell<StackCopy>);
    // SAFETY: written by the handler while the test thread is stopped in
    // the faulting instruction, read by that thread after it resumes.
    unsafe impl Sync for Saved {}
    static SAVED: Saved = Saved(UnsafeCell::new(StackCopy::EMPTY));
    static FAULTS: AtomicUsize = AtomicUsize::new(0);

    extern "C" fn on_fault(_sig: i32, info: *mut libc::siginfo_t, ctx: *mut c_void) {
        // SAFETY: the kernel's siginfo for a SIGSEGV; SAVED is ours (see
        // Saved); the page is one the test protected.
        unsafe {
            if FAULTS.fetch_add(1, Ordering::SeqCst) == 0 {
                fault::capture(ctx, &mut *SAVED.0.get(), u64::MAX);
            }
            let page = (*info).si_addr() as usize & !4095;
            libc::mprotect(
                page as *mut c_void,
                4096,
                libc::PROT_READ | libc::PROT_WRITE,
            );
        }
    }

    /// Builds `source` (collector/tests/walk) into a shared object with
    /// `compiler`; None when the compiler is missing and
    /// ACCPROF_TEST_ALLOW_MISSING names it.
    fn build(compiler: &str, source: &str, dir: &Path) -> Option<PathBuf> {
        let src = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/walk")
            .join(source);
        let out = dir.join(format!("lib{source}.so"));
        let run = Command::new(compiler)
            .args(["-O2", "-g", "-fPIC", "-shared", "-fomit-frame-pointer"])
            .arg(&src)
            .arg("-o")
            .arg(&out)
            .output();
        match run {
            Ok(r) => assert!(
                r.status.success(),
                "{compiler} {}: {}",
                src.display(),
                String::from_utf8_lossy(&r.stderr)
            ),
            Err(e) => {
                let allowed = std::env::var("ACCPROF_TEST_ALLOW_MISSING").unwrap_or_default();
                assert!(
                    allowed.split(',').any(|t| t == compiler),
                    "{compiler} is needed to build {source}: {e}"
                );
                eprintln!("{compiler} is missing: the walk out of its runtime was not tested");
                return None;
            }
        }
        Some(out)
    }

    fn line_of(source: &str, mark: &str) -> u32 {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/walk")
            .join(source);
        let text = std::fs::read_to_string(path).expect("source");
        text.lines()
            .position(|l| l.contains(mark))
            .expect("marked line") as u32
            + 1
    }

    /// The loaded object holding `addr` and `addr`'s offset in it.
    fn object(addr: u64) -> (String, u64) {
        // SAFETY: Dl_info is plain data; dladdr fills it or returns 0.
        unsafe {
            let mut info: libc::Dl_info = std::mem::zeroed();
            assert_ne!(libc::dladdr(addr as usize as *const c_void, &mut info), 0);
            let name = CStr::from_ptr(info.dli_fname)
                .to_string_lossy()
                .into_owned();
            (name, addr - info.dli_fbase as u64)
        }
    }

    /// file:line of a return address in `so`, as addr2line reads it.
    fn source_line(so: &Path, ret: u64) -> String {
        let (name, off) = object(ret);
        assert_eq!(Path::new(&name), so, "the frame is in the built object");
        let out = Command::new("addr2line")
            .arg("-e")
            .arg(so)
            .arg(format!("{:#x}", off - 1))
            .output()
            .expect("addr2line runs");
        let text = String::from_utf8_lossy(&out.stdout);
        let l = text.trim();
        let (file, line) = l.rsplit_once(':').expect("file:line");
        let file = file.rsplit('/').next().unwrap_or(file);
        let line = line.split_whitespace().next().unwrap_or(line);
        format!("{file}:{line}")
    }

    /// A page-sized buffer holding `fill`, then protected.
    struct Page(*mut u8);

    impl Page {
        fn new(fill: &[u8]) -> Page {
            // SAFETY: an anonymous private page, filled then protected.
            unsafe {
                let p = libc::mmap(
                    std::ptr::null_mut(),
                    4096,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                );
                assert_ne!(p, libc::MAP_FAILED);
                std::ptr::copy_nonoverlapping(fill.as_ptr(), p.cast(), fill.len().min(4096));
                assert_eq!(libc::mprotect(p, 4096, libc::PROT_NONE), 0);
                Page(p.cast())
            }
        }
    }

    impl Drop for Page {
        fn drop(&mut self) {
            // SAFETY: the page `new` mapped.
            unsafe { libc::munmap(self.0.cast(), 4096) };
        }
    }

    /// Runs `call` (which reads a protected page inside `lib`), then
    /// walks the copy the handler saved: the faulting instruction must
    /// be in a module whose name starts with `lib` and the first frame in
    /// `so` at `want` (file:line).
    fn check(what: &str, lib: &str, so: &Path, want: &str, call: impl FnOnce()) {
        FAULTS.store(0, Ordering::SeqCst);
        call();
        assert!(FAULTS.load(Ordering::SeqCst) > 0, "{what}: no fault");
        // SAFETY: the handler is done (the call returned).
        let copy = unsafe { &*SAVED.0.get() };
        let (fault_in, _) = object(copy.regs.pc);
        let name = fault_in.rsplit('/').next().unwrap_or(&fault_in);
        assert!(name.starts_with(lib), "{what}: faulted in {fault_in}");
        assert!(copy.words > 64, "{what}: {} stack words saved", copy.words);
        let mut frames = [0u64; fault::FRAMES];
        let n = walk(copy, &mut frames);
        let walked: Vec<String> = frames[..n]
            .iter()
            .map(|&f| {
                let (o, off) = object(f);
                format!("{o}+{off:#x}")
            })
            .collect();
        let mine = frames[..n]
            .iter()
            .find(|&&f| object(f).0 == so.display().to_string())
            .unwrap_or_else(|| panic!("{what}: no frame in {}: {walked:#?}", so.display()));
        assert_eq!(source_line(so, *mine), want, "{what}: {walked:#?}");
    }

    /// The tests install SIGSEGV handlers: one at a time.
    static SIGNALS: std::sync::Mutex<()> = std::sync::Mutex::new(());

    #[test]
    fn walks_out_of_libc_and_libgfortran_to_the_calling_line() {
        let _one = SIGNALS.lock().unwrap_or_else(|e| e.into_inner());
        let dir = tempfile_dir();
        fault::learn_stack_end();
        // SAFETY: an all-zero sigaction is a valid value.
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: a handler of the test's own for SIGSEGV while the calls
        // run, the previous one put back after them.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_fault as *const () as usize;
            sa.sa_flags = libc::SA_SIGINFO;
            libc::sigemptyset(&mut sa.sa_mask);
            assert_eq!(libc::sigaction(libc::SIGSEGV, &sa, &mut old), 0);
        }
        if let Some(so) = build("gcc", "reads.c", &dir) {
            let lib = open(&so);
            type Copy = unsafe extern "C" fn(*mut f64, *const f64, usize) -> f64;
            type Put = unsafe extern "C" fn(*mut libc::FILE, *const f64, usize) -> usize;
            type Say = unsafe extern "C" fn(*mut libc::FILE, *const c_char) -> i32;
            let (copy_it, put_it, say_it): (Copy, Put, Say) = (
                symbol(lib, "copy_it"),
                symbol(lib, "put_it"),
                symbol(lib, "say_it"),
            );
            // SAFETY: fopen of /dev/null; a stream buffered in full.
            let null = unsafe { libc::fopen(c"/dev/null".as_ptr(), c"w".as_ptr()) };
            assert!(!null.is_null());
            let at = |mark: &str| format!("reads.c:{}", line_of("reads.c", mark));
            let src = Page::new(&[1u8; 4096]);
            let mut dst = vec![0f64; 64];
            check("memcpy", "libc", &so, &at("read: memcpy"), || {
                // SAFETY: 64 doubles from the page into dst.
                unsafe { copy_it(dst.as_mut_ptr(), src.0.cast(), 64) };
            });
            let src = Page::new(&[2u8; 4096]);
            check("fwrite", "libc", &so, &at("read: fwrite"), || {
                // SAFETY: 64 doubles from the page into the stream's buffer.
                unsafe { put_it(null, src.0.cast(), 64) };
            });
            let mut text = vec![b'x'; 100];
            text.push(0);
            let src = Page::new(&text);
            check("fprintf", "libc", &so, &at("read: fprintf"), || {
                // SAFETY: a NUL-terminated string on the page.
                unsafe { say_it(null, src.0.cast()) };
            });
            // SAFETY: the stream fopen gave.
            unsafe { libc::fclose(null) };
        }
        if let Some(so) = build("gfortran", "reads.f90", &dir) {
            let lib = open(&so);
            type Show = unsafe extern "C" fn(*const f64, i32);
            let show: Show = symbol(lib, "show");
            let values: Vec<u8> = (0..512).flat_map(|i| (i as f64).to_ne_bytes()).collect();
            let src = Page::new(&values);
            let want = format!("reads.f90:{}", line_of("reads.f90", "read: print"));
            check("print", "libgfortran", &so, &want, || {
                // SAFETY: 512 doubles on the page.
                unsafe { show(src.0.cast(), 512) };
            });
        }
        // SAFETY: the disposition saved above.
        unsafe { libc::sigaction(libc::SIGSEGV, &old, std::ptr::null_mut()) };
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The check's own handler, as the collector installs it, on a stale
    /// range that libc's memcpy reads: the fault drained at the next
    /// boundary carries the return addresses, the program's call to
    /// memcpy among them.
    #[test]
    fn the_checks_handler_keeps_what_the_drain_walks_out_of_libc() {
        use super::super::table::{Range, Snapshot, State};
        let _one = SIGNALS.lock().unwrap_or_else(|e| e.into_inner());
        let dir = tempfile_dir();
        let Some(so) = build("gcc", "reads.c", &dir) else {
            return;
        };
        let lib = open(&so);
        type Copy = unsafe extern "C" fn(*mut f64, *const f64, usize) -> f64;
        let copy_it: Copy = symbol(lib, "copy_it");
        let src = Page::new(&[3u8; 4096]);
        let stale = Range {
            start: src.0 as u64,
            bytes: 4096,
            device: 0,
            name: 0,
            state: State::DeviceNewer { since: 7 },
            unread: None,
            unproven: false,
            gone: false,
        };
        let mut retired = Vec::new();
        fault::publish(&Snapshot::new(vec![stale], 4096, &[]), &mut retired);
        // The collector's handler, which hands SIGSEGV to the check first.
        crate::start::resolve_before_handlers();
        crate::signals::install();
        fault::install();
        // As the thread's first construct would.
        fault::learn_stack_end();
        let mut dst = vec![0f64; 64];
        // SAFETY: 64 doubles from the watched page into dst.
        let first = unsafe { copy_it(dst.as_mut_ptr(), src.0.cast(), 64) };
        assert_eq!(first.to_ne_bytes(), [3u8; 8], "the read went through");
        let mut faults = Vec::new();
        fault::drain(|mut f, copy| {
            if copy.words > 0 && !crate::coherence::walk::in_main_executable(f.code_addr) {
                f.nframes = crate::coherence::walk::walk(copy, &mut f.frames);
            }
            faults.push(f);
        });
        fault::publish(&Snapshot::new(Vec::new(), 4096, &[]), &mut retired);
        assert_eq!(faults.len(), 1, "{faults:#?}");
        let f = &faults[0];
        assert_eq!(f.host_addr, src.0 as u64);
        let (fault_in, _) = object(f.code_addr);
        assert!(fault_in.contains("libc"), "faulted in {fault_in}");
        let frames = &f.frames[..f.nframes];
        let mine = frames
            .iter()
            .find(|&&a| object(a).0 == so.display().to_string())
            .unwrap_or_else(|| panic!("no frame in {}: {frames:x?}", so.display()));
        let want = format!("reads.c:{}", line_of("reads.c", "read: memcpy"));
        assert_eq!(source_line(&so, *mine), want);
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn tempfile_dir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!("accprof-walk-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        dir
    }

    fn open(so: &Path) -> *mut c_void {
        let path = CString::new(so.display().to_string()).expect("path");
        // SAFETY: dlopen of the object just built.
        let h = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW) };
        assert!(!h.is_null(), "dlopen {}", so.display());
        h
    }

    fn symbol<T: Copy>(lib: *mut c_void, name: &str) -> T {
        let c = CString::new(name).expect("name");
        // SAFETY: dlsym in the object just opened; T is the function type
        // the source defines.
        unsafe {
            let f = libc::dlsym(lib, c.as_ptr());
            assert!(!f.is_null(), "{name}");
            std::mem::transmute_copy(&f)
        }
    }
}
