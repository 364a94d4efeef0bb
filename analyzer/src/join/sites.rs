//! Where the join's records point in the source: call sites and their
//! callers (symbolized once each), and the code addresses of the
//! coherence check's host accesses.

use accprof_trace::CallSiteId;

use super::{Join, Sink};
use crate::model::{Site, SiteId};
use crate::symbolize::{SymbolizedSite, Symbolizer};

impl<S: Sink> Join<S> {
    /// The source site of an interned call site, symbolized once.
    pub(super) fn call_site_site(&mut self, cs: CallSiteId, symbolizer: &mut Symbolizer) -> SiteId {
        if let Some(id) = self.symbolized.get(u64::from(cs.0)) {
            return id;
        }
        let site = match self.call_sites.get(&cs).copied() {
            Some(c) => match self.modules.get(&c.module) {
                Some(m) => symbolized(symbolizer, m, c.return_offset, c.return_offset),
                None => Site::unknown(),
            },
            None => Site::unknown(),
        };
        let id = self.intern_site(site);
        self.symbolized.insert(u64::from(cs.0), id);
        self.find_callers(cs, id, symbolizer);
        id
    }

    /// The source frames above the call site `cs` (symbolized as `id`):
    /// the functions its call was inlined into, then each recorded caller
    /// with the functions that call was inlined into. Kept for the first
    /// call site that symbolizes to `id`.
    pub(super) fn find_callers(&mut self, cs: CallSiteId, id: SiteId, symbolizer: &mut Symbolizer) {
        if self.callers.contains_key(&id) {
            return;
        }
        let Some(c) = self.call_sites.get(&cs).copied() else {
            return;
        };
        let frame = |s: &mut Symbolizer, m: &accprof_trace::Module, off: u64| {
            s.frames(m, off)
                .into_iter()
                .map(move |(file, function, line)| Site {
                    file,
                    function,
                    line: Some(line),
                    address: Some((m.path.clone(), off)),
                })
                .collect::<Vec<_>>()
        };
        let mut out = Vec::new();
        if let Some(m) = self.modules.get(&c.module) {
            out.extend(frame(symbolizer, m, c.return_offset).into_iter().skip(1));
        }
        for f in self.call_chains.get(&cs).into_iter().flatten() {
            if let Some(m) = self.modules.get(&f.module) {
                out.extend(frame(symbolizer, m, f.return_offset));
            }
        }
        if !out.is_empty() {
            self.callers.insert(id, out);
        }
    }

    pub(super) fn add_coherence(
        &mut self,
        k: &accprof_trace::Coherence,
        symbolizer: &mut Symbolizer,
    ) {
        self.see_time(k.time_ns);
        // An unread download has no host instruction: it is the
        // download's construct that the finding is about.
        let site = (k.code_addr != 0).then(|| self.access_site(k, symbolizer));
        let construct = self
            .recent
            .iter()
            .rev()
            .find(|(r, _)| *r == k.construct.0)
            .map(|&(_, c)| c);
        let variable = self.name(k.variable);
        self.host_accesses.push(crate::model::HostAccess {
            kind: k.kind,
            time_ns: k.time_ns,
            thread: k.thread,
            site,
            host_addr: k.host_addr,
            range_start: k.range_start,
            range_bytes: k.range_bytes,
            variable,
            construct,
            confirmed: k.confirmed,
        });
    }

    /// Where a host access is reported: its instruction, or when that is
    /// a library's (libgfortran's formatted I/O, libc's memcpy, MPI) the
    /// program's call into the library: the first frame above it, as the
    /// collector's walk found them, that is in a module of the program.
    fn access_site(&mut self, k: &accprof_trace::Coherence, symbolizer: &mut Symbolizer) -> SiteId {
        let in_library = self
            .module_holding(k.code_addr)
            .map_or(true, |m| library(&m.path));
        if in_library {
            let program = k.callers.iter().find_map(|f| {
                let m = self.modules.get(&f.module)?;
                (!library(&m.path)).then(|| (m.clone(), f.return_offset))
            });
            if let Some((m, off)) = program {
                let addr = m.base.wrapping_add(off);
                if let Some(&id) = self.return_sites.get(&addr) {
                    return id;
                }
                let site = symbolized(symbolizer, &m, off, off);
                let site = if toolchain_header(&site.file) {
                    program_frame(symbolizer, &m, off - 1).unwrap_or(site)
                } else {
                    site
                };
                let id = self.intern_site(site);
                self.return_sites.insert(addr, id);
                return id;
            }
        }
        self.code_site(k.code_addr, symbolizer)
    }

    /// The module of the trace whose code holds `addr`.
    fn module_holding(&self, addr: u64) -> Option<&accprof_trace::Module> {
        self.modules.values().find(|m| {
            addr >= m.base.saturating_add(m.text_start) && addr < m.base.saturating_add(m.text_end)
        })
    }

    /// The source site of a code address (an instruction's own address,
    /// not a return address), in the module of the trace that holds it.
    pub(super) fn code_site(&mut self, addr: u64, symbolizer: &mut Symbolizer) -> SiteId {
        if let Some(&id) = self.code_sites.get(&addr) {
            return id;
        }
        let module = self
            .modules
            .values()
            .find(|m| {
                addr >= m.base.saturating_add(m.text_start)
                    && addr < m.base.saturating_add(m.text_end)
            })
            .cloned();
        let site = match module {
            Some(m) => {
                let offset = addr - m.base;
                // lookup() reads a return address, at the byte before it.
                let site = symbolized(symbolizer, &m, offset + 1, offset);
                if toolchain_header(&site.file) {
                    // Library code inlined into the program's statement
                    // (std::inner_product over a vector): the statement is
                    // where the access is written.
                    program_frame(symbolizer, &m, offset).unwrap_or(site)
                } else {
                    site
                }
            }
            None => Site {
                address: Some(("(no module)".into(), addr)),
                ..Site::unknown()
            },
        };
        let id = self.intern_site(site);
        self.code_sites.insert(addr, id);
        id
    }
}

/// A shared library of the system or of a toolchain (libc, libgfortran,
/// MPI, BLAS, the OpenACC runtime, the collector), not the program's own
/// code: an access made inside one is reported at the program's call.
pub(crate) fn library(path: &str) -> bool {
    const DIRS: [&str; 7] = [
        "/lib/",
        "/lib64/",
        "/usr/lib/",
        "/usr/lib64/",
        "/usr/local/cuda",
        "/opt/nvidia/",
        "/usr/local/lib/",
    ];
    const NAMES: [&str; 25] = [
        "ld-linux",
        "libc.so",
        "libc-",
        "libm.so",
        "libpthread",
        "libgfortran",
        "libquadmath",
        "libstdc++",
        "libgcc_s",
        "libgomp",
        "libmpi",
        "libopen-pal",
        "libopen-rte",
        "libucp",
        "libucs",
        "libblas",
        "libopenblas",
        "liblapack",
        "libmkl",
        "libcuda",
        "libcupti",
        "libcublas",
        "libnv",
        "libpgf",
        "libaccprof",
    ];
    let name = path.rsplit('/').next().unwrap_or(path);
    DIRS.iter().any(|d| path.starts_with(d)) || NAMES.iter().any(|n| name.starts_with(n))
}

/// A header of the compiler's own libraries (libstdc++'s templates, GCC's
/// intrinsics), whose code is inlined into the program's.
fn toolchain_header(file: &str) -> bool {
    file.starts_with("/usr/include/")
        || file.contains("/include/c++/")
        || file.contains("/lib/gcc/")
}

/// The innermost source frame of the instruction at `offset` that is the
/// program's own, not a toolchain header's.
fn program_frame(
    symbolizer: &mut Symbolizer,
    m: &accprof_trace::Module,
    offset: u64,
) -> Option<Site> {
    let (file, function, line) = symbolizer
        .frames(m, offset + 1)
        .into_iter()
        .find(|(f, _, _)| !toolchain_header(f))?;
    Some(Site {
        file,
        function,
        line: Some(line),
        address: Some((m.path.clone(), offset)),
    })
}

/// The site `lookup` gives for `offset` in `m` (`at`: the offset kept as
/// the site's address).
fn symbolized(
    symbolizer: &mut Symbolizer,
    m: &accprof_trace::Module,
    lookup: u64,
    at: u64,
) -> Site {
    match symbolizer.lookup(m, lookup) {
        SymbolizedSite::Found {
            file,
            function,
            line,
        } => Site {
            file,
            function,
            line,
            address: Some((m.path.clone(), at)),
        },
        SymbolizedSite::NoDebugInfo { function } => Site {
            file: m.path.clone(),
            function: function.unwrap_or_else(|| "?".into()),
            line: None,
            address: Some((m.path.clone(), at)),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::library;

    #[test]
    fn system_and_toolchain_libraries_are_not_the_program() {
        for lib in [
            "/lib/x86_64-linux-gnu/libc.so.6",
            "/usr/lib/x86_64-linux-gnu/libgfortran.so.5",
            "/usr/lib/x86_64-linux-gnu/openmpi/lib/libmpi.so.40",
            "/opt/conda/lib/libgfortran.so.5",
            "/home/u/spack/openmpi/lib/libmpi.so.40",
            "/usr/local/cuda/lib64/libcupti.so",
            "/work/target/release/libaccprof.so",
        ] {
            assert!(library(lib), "{lib}");
        }
        for program in [
            "/home/u/app/sp.W.x",
            "/usr/bin/app",
            "/home/u/app/build/libsolver.so",
        ] {
            assert!(!library(program), "{program}");
        }
    }
}
