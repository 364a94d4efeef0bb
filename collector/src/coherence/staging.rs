//! The OpenACC runtime's staging buffers, told apart from arrays exactly.
//!
//! GCC's libgomp copies the small arrays of one data construct into a
//! buffer it mallocs, uploads that buffer in one copy and frees it: the
//! copy the driver reports then names the buffer, not an array, and
//! watching it would watch freed heap memory. While the check runs, the
//! runtime's own calls of `free` go through [`runtime_free`] (its entry in
//! the runtime's global offset table is pointed there; nothing else in the
//! process is touched), which remembers the last addresses freed: a range
//! mapped from a copy whose host address the runtime has since freed was
//! a staging buffer. Its calls of `memcpy` go through [`runtime_memcpy`]
//! the same way, which remembers the last copies: libgomp fills the
//! buffer with one `memcpy` per array (`gomp_copy_host2dev`), so the
//! copies into a buffer's span name its arrays' host addresses and their
//! offsets in it, hence their device addresses.

use std::ffi::{c_void, CStr};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// The last addresses the runtime freed.
const KEPT: usize = 256;
static FREED: [AtomicU64; KEPT] = [const { AtomicU64::new(0) }; KEPT];
static NEXT: AtomicUsize = AtomicUsize::new(0);

/// The runtime's `free`, through which it returns its buffers.
pub(super) unsafe extern "C" fn runtime_free(p: *mut c_void) {
    if !p.is_null() {
        let i = NEXT.fetch_add(1, Ordering::Relaxed) % KEPT;
        FREED[i].store(p as u64, Ordering::Release);
    }
    // SAFETY: the runtime's own call, passed on as it was made.
    unsafe { libc::free(p) }
}

/// The last copies the runtime made with `memcpy`: destination, source,
/// bytes (a slot is taken whole; a torn one is caught by the comparison
/// that proves each array found).
static COPIES: [[AtomicU64; 3]; KEPT] = [const { [const { AtomicU64::new(0) }; 3] }; KEPT];
static NEXT_COPY: AtomicUsize = AtomicUsize::new(0);

/// The runtime's `memcpy`, through which it fills its staging buffers.
pub(super) unsafe extern "C" fn runtime_memcpy(
    dst: *mut c_void,
    src: *const c_void,
    n: libc::size_t,
) -> *mut c_void {
    if n > 0 {
        let slot = &COPIES[NEXT_COPY.fetch_add(1, Ordering::Relaxed) % KEPT];
        slot[0].store(0, Ordering::Release);
        slot[1].store(src as u64, Ordering::Relaxed);
        slot[2].store(n as u64, Ordering::Relaxed);
        slot[0].store(dst as u64, Ordering::Release);
    }
    // SAFETY: the runtime's own call, passed on as it was made.
    unsafe { libc::memcpy(dst, src, n) }
}

/// The runtime's copies into `lo..hi` (a staging buffer's span), taken:
/// destination, source, bytes.
pub(super) fn copies_into(lo: u64, hi: u64) -> Vec<(u64, u64, u64)> {
    let mut out = Vec::new();
    for slot in &COPIES {
        let dst = slot[0].load(Ordering::Acquire);
        if dst < lo || dst >= hi || dst == 0 {
            continue;
        }
        let (src, n) = (
            slot[1].load(Ordering::Relaxed),
            slot[2].load(Ordering::Relaxed),
        );
        if slot[0]
            .compare_exchange(dst, 0, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
            && dst.saturating_add(n) <= hi
            && src != 0
        {
            out.push((dst, src, n));
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// Whether the runtime freed `addr` lately (it was one of its buffers).
pub(super) fn freed_by_runtime(addr: u64) -> bool {
    addr != 0 && FREED.iter().any(|f| f.load(Ordering::Acquire) == addr)
}

/// Forgets `addr` (a range mapped again at an address the allocator gave
/// back out).
pub(super) fn forget(addr: u64) {
    for f in &FREED {
        let _ = f.compare_exchange(addr, 0, Ordering::AcqRel, Ordering::Relaxed);
    }
}

/// Points the OpenACC runtime's (libgomp's) global offset table entries
/// for `free` at [`runtime_free`] and for `memcpy` at [`runtime_memcpy`].
/// False when no such runtime is loaded or its dynamic section could not
/// be read.
pub(super) fn watch_runtime_frees() -> bool {
    let mut found = false;
    // SAFETY: the callback gets the loader's descriptions of the loaded
    // objects, valid during the call.
    unsafe {
        libc::dl_iterate_phdr(Some(each_object), (&mut found as *mut bool).cast());
    }
    found
}

unsafe extern "C" fn each_object(
    info: *mut libc::dl_phdr_info,
    _size: libc::size_t,
    data: *mut c_void,
) -> libc::c_int {
    // SAFETY: the loader's description of one object (see dl_iterate_phdr).
    let info = unsafe { &*info };
    if info.dlpi_name.is_null() {
        return 0;
    }
    // SAFETY: a NUL-terminated path the loader owns.
    let name = unsafe { CStr::from_ptr(info.dlpi_name) }.to_bytes();
    let file = name.rsplit(|&c| c == b'/').next().unwrap_or(name);
    if !file.starts_with(b"libgomp.so") {
        return 0;
    }
    // SAFETY: as above; `data` is the caller's bool.
    unsafe {
        if hook(info) {
            *data.cast::<bool>() = true;
        }
    }
    1
}

/// ELF's dynamic entry, relocation with addend and symbol (64-bit).
#[repr(C)]
struct Dyn {
    tag: i64,
    val: u64,
}
#[repr(C)]
struct Rela {
    offset: u64,
    info: u64,
    addend: i64,
}
#[repr(C)]
struct Sym {
    name: u32,
    info: u8,
    other: u8,
    shndx: u16,
    value: u64,
    size: u64,
}
const DT_NULL: i64 = 0;
const DT_PLTRELSZ: i64 = 2;
const DT_STRTAB: i64 = 5;
const DT_SYMTAB: i64 = 6;
const DT_RELA: i64 = 7;
const DT_RELASZ: i64 = 8;
const DT_JMPREL: i64 = 23;

/// # Safety
/// `info` describes a loaded object whose dynamic section is mapped.
unsafe fn hook(info: &libc::dl_phdr_info) -> bool {
    let base = info.dlpi_addr;
    // SAFETY: the object's program headers, `dlpi_phnum` of them.
    let phdrs = unsafe { std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) };
    let Some(dynamic) = phdrs.iter().find(|p| p.p_type == libc::PT_DYNAMIC) else {
        return false;
    };
    let relro = phdrs
        .iter()
        .find(|p| p.p_type == libc::PT_GNU_RELRO)
        .map(|p| (base + p.p_vaddr, base + p.p_vaddr + p.p_memsz));
    // The loader relocated most pointers of the dynamic section in place;
    // one it did not is still relative to the object's base.
    let abs = |v: u64| if v < base { v + base } else { v };
    let (mut symtab, mut strtab) = (0u64, 0u64);
    let mut tables: [(u64, u64); 2] = [(0, 0); 2];
    let mut d = (base + dynamic.p_vaddr) as *const Dyn;
    // SAFETY: the dynamic section ends with DT_NULL.
    unsafe {
        while (*d).tag != DT_NULL {
            let v = (*d).val;
            match (*d).tag {
                DT_SYMTAB => symtab = abs(v),
                DT_STRTAB => strtab = abs(v),
                DT_JMPREL => tables[0].0 = abs(v),
                DT_PLTRELSZ => tables[0].1 = v,
                DT_RELA => tables[1].0 = abs(v),
                DT_RELASZ => tables[1].1 = v,
                _ => {}
            }
            d = d.add(1);
        }
    }
    if symtab == 0 || strtab == 0 {
        return false;
    }
    let mut hooked = false;
    for (at, size) in tables {
        if at == 0 {
            continue;
        }
        let n = size as usize / std::mem::size_of::<Rela>();
        // SAFETY: the relocation table the dynamic section names.
        let relas = unsafe { std::slice::from_raw_parts(at as *const Rela, n) };
        for r in relas {
            let sym = (r.info >> 32) as usize;
            if sym == 0 || !slot_kind(r.info as u32) {
                continue;
            }
            // SAFETY: symbol `sym` of the table and its name in the string
            // table, both the dynamic section's.
            let name = unsafe {
                let s = &*(symtab as *const Sym).add(sym);
                CStr::from_ptr((strtab + u64::from(s.name)) as *const libc::c_char)
            };
            let hook = match name.to_bytes() {
                b"free" => runtime_free as unsafe extern "C" fn(*mut c_void) as usize as u64,
                b"memcpy" => {
                    runtime_memcpy
                        as unsafe extern "C" fn(
                            *mut c_void,
                            *const c_void,
                            libc::size_t,
                        ) -> *mut c_void as usize as u64
                }
                _ => continue,
            };
            let slot = base + r.offset;
            // SAFETY: the object's global offset table entry for `free` or
            // `memcpy`, given a function of the same signature.
            hooked |= unsafe { write_slot(slot, relro, hook) };
        }
    }
    hooked
}

/// R_X86_64_GLOB_DAT / JUMP_SLOT, R_AARCH64_GLOB_DAT / JUMP_SLOT.
fn slot_kind(t: u32) -> bool {
    if cfg!(target_arch = "x86_64") {
        t == 6 || t == 7
    } else if cfg!(target_arch = "aarch64") {
        t == 1025 || t == 1026
    } else {
        false
    }
}

/// # Safety
/// `slot` is a global offset table entry of a loaded object.
unsafe fn write_slot(slot: u64, relro: Option<(u64, u64)>, hook: u64) -> bool {
    let page = super::fault::PAGE.load(Ordering::Relaxed);
    let lo = slot & !(page - 1);
    let sealed = relro.is_some_and(|(a, b)| slot >= a && slot < b);
    // SAFETY: the page of the entry, made writable for the one store and
    // sealed again where the loader had sealed it.
    unsafe {
        if sealed
            && libc::mprotect(
                lo as *mut c_void,
                page as usize,
                libc::PROT_READ | libc::PROT_WRITE,
            ) != 0
        {
            return false;
        }
        (slot as *mut u64).write_volatile(hook);
        if sealed {
            libc::mprotect(lo as *mut c_void, page as usize, libc::PROT_READ);
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_runtimes_frees_are_remembered_and_forgotten() {
        let p = Box::into_raw(Box::new([0u8; 64]));
        let a = p as u64;
        assert!(!freed_by_runtime(a));
        // SAFETY: a block of the global allocator (malloc), freed once.
        unsafe { runtime_free(p.cast()) };
        assert!(freed_by_runtime(a));
        forget(a);
        assert!(!freed_by_runtime(a));
        assert!(!freed_by_runtime(0));
    }

    /// libgomp fills its staging buffer with one memcpy per array: the
    /// copies into the buffer's span are taken once, with their sources.
    #[test]
    fn the_runtimes_copies_into_a_span_are_taken_once() {
        let (a, b) = ([1u8; 40], [2u8; 24]);
        let mut buf = [0u8; 64];
        let at = buf.as_mut_ptr();
        // SAFETY: copies between live local arrays of the sizes given.
        unsafe {
            runtime_memcpy(at.cast(), a.as_ptr().cast(), 40);
            runtime_memcpy(at.add(40).cast(), b.as_ptr().cast(), 24);
        }
        assert_eq!(&buf[38..42], &[1, 1, 2, 2]);
        let lo = at as u64;
        let got = copies_into(lo, lo + 64);
        assert_eq!(
            got,
            [
                (lo, a.as_ptr() as u64, 40),
                (lo + 40, b.as_ptr() as u64, 24)
            ]
        );
        assert!(copies_into(lo, lo + 64).is_empty());
    }
}
