//! Offline symbolization: call sites (module + offset -> file, function,
//! line, with addr2line over the module's DWARF) and data objects (a host
//! address -> the global or static that starts there, from the ELF symbol
//! table). Every lookup in the program's binaries goes through
//! [`Symbolizer`], so they all find the same file. Loaders and symbol
//! tables are cached per module path; a missing or unreadable binary is
//! said once and its sites stay as addresses.
//!
//! A trace names each binary by the path it had on the recording machine and
//! by its GNU build id. Where that path is missing or holds another build,
//! the search directories are tried (file name, same build id), so a trace
//! and a copy of its binaries read anywhere.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use accprof_trace::Module;

pub enum SymbolizedSite {
    Found {
        file: String,
        function: String,
        line: Option<u32>,
    },
    /// The module could not be read, or has no line tables for the address.
    NoDebugInfo { function: Option<String> },
}

pub struct Symbolizer {
    loaders: HashMap<String, Option<addr2line::Loader>>,
    /// Per module path: its data objects by module-relative start address.
    data: HashMap<String, Option<HashMap<u64, String>>>,
    search_dirs: Vec<PathBuf>,
    /// Whether a module's recorded path is tried before the search
    /// directories.
    pub recorded_paths: bool,
    /// What could not be done, one line per module.
    pub notes: Vec<String>,
}

/// The GNU build id of an ELF file; None when it cannot be read or has none.
pub fn build_id(path: &Path) -> Option<Vec<u8>> {
    use object::Object;
    let file = std::fs::File::open(path).ok()?;
    let cache = object::ReadCache::new(file);
    let obj = object::File::parse(&cache).ok()?;
    obj.build_id().ok().flatten().map(<[u8]>::to_vec)
}

/// The data objects (variables of static storage: globals, statics,
/// Fortran module variables) an ELF file defines, by start address as the
/// file gives it; the full symbol table, else the dynamic one of a
/// stripped file. None when the file cannot be read.
pub fn data_symbols(path: &Path) -> Option<HashMap<u64, String>> {
    use object::{Object, ObjectSymbol, SymbolKind};
    let file = std::fs::File::open(path).ok()?;
    let cache = object::ReadCache::new(file);
    let obj = object::File::parse(&cache).ok()?;
    let mut out = HashMap::new();
    for table in [obj.symbols(), obj.dynamic_symbols()] {
        for sym in table {
            if sym.kind() != SymbolKind::Data || !sym.is_definition() || sym.address() == 0 {
                continue;
            }
            if let Ok(name) = sym.name() {
                if !name.is_empty() {
                    out.entry(sym.address())
                        .or_insert_with(|| demangle_data_symbol(name));
                }
            }
        }
        if !out.is_empty() {
            break;
        }
    }
    Some(out)
}

/// gfortran names module variables `__mod_MOD_var`; C names are plain.
fn demangle_data_symbol(name: &str) -> String {
    match name.find("_MOD_") {
        Some(i) if name.starts_with("__") => name[i + 5..].to_string(),
        _ => name.to_string(),
    }
}

impl Default for Symbolizer {
    fn default() -> Self {
        Symbolizer {
            loaders: HashMap::new(),
            data: HashMap::new(),
            search_dirs: Vec::new(),
            recorded_paths: true,
            notes: Vec::new(),
        }
    }
}

/// The files a recorded path may stand for when it was not UTF-8: the
/// trace holds such a path with each invalid sequence replaced by U+FFFD,
/// so each such component is matched against the names in its directory
/// read the same way. Empty for a path without a replacement character.
fn lossy_matches(recorded: &Path) -> Vec<PathBuf> {
    if !recorded.as_os_str().to_string_lossy().contains('\u{FFFD}') {
        return Vec::new();
    }
    let mut found = vec![PathBuf::new()];
    for c in recorded.components() {
        let c = c.as_os_str();
        let mut next = Vec::new();
        for base in &found {
            if c.to_string_lossy().contains('\u{FFFD}') {
                next.extend(entries_named(base, c));
            } else {
                next.push(base.join(c));
            }
        }
        // A handful of look-alike names at most: the build id decides.
        next.truncate(16);
        found = next;
    }
    found
}

/// The entries of `dir` whose names read as `name` once invalid UTF-8 is
/// replaced (`name` itself may hold U+FFFD for bytes the trace lost).
fn entries_named(dir: &Path, name: &std::ffi::OsStr) -> Vec<PathBuf> {
    let want = name.to_string_lossy();
    if !want.contains('\u{FFFD}') {
        return Vec::new();
    }
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy() == want)
                .map(|e| dir.join(e.file_name()))
                .collect()
        })
        .unwrap_or_default()
}

impl Symbolizer {
    pub fn new() -> Self {
        Self::default()
    }

    /// A symbolizer that also looks for binaries in `dirs`.
    pub fn with_search_dirs(dirs: Vec<PathBuf>) -> Self {
        Symbolizer {
            search_dirs: dirs,
            ..Self::default()
        }
    }

    /// The file that holds `module`'s build: its recorded path when that is
    /// the same build (or the trace has no build id) and recorded paths are
    /// tried, else a file of the same name with the same build id in a
    /// search directory.
    pub fn locate(&self, module: &Module) -> Option<PathBuf> {
        let same_build = |p: &Path| {
            p.is_file()
                && (module.build_id.is_empty()
                    || build_id(p).is_some_and(|id| id == module.build_id))
        };
        let recorded = Path::new(&module.path);
        if self.recorded_paths {
            if same_build(recorded) {
                return Some(recorded.to_path_buf());
            }
            if let Some(p) = lossy_matches(recorded).into_iter().find(|p| same_build(p)) {
                return Some(p);
            }
        }
        let name = recorded.file_name()?;
        self.search_dirs
            .iter()
            .flat_map(|d| {
                let mut c = vec![d.join(name)];
                c.extend(entries_named(d, name));
                c
            })
            .find(|p| same_build(p))
    }

    /// The names of the data objects that start exactly at `addrs`, host
    /// addresses in the running process that lie in `module` (loaded at
    /// `module.base`); addresses that start no data object are left out.
    /// Read from the module's file as [`Symbolizer::locate`] finds it.
    pub fn data_names(
        &mut self,
        module: &Module,
        addrs: impl IntoIterator<Item = u64>,
    ) -> HashMap<u64, String> {
        if !self.data.contains_key(&module.path) {
            let table = self.locate(module).and_then(|p| data_symbols(&p));
            self.data.insert(module.path.clone(), table);
        }
        let Some(table) = self.data.get(&module.path).and_then(Option::as_ref) else {
            return HashMap::new();
        };
        addrs
            .into_iter()
            .filter_map(|a| {
                let name = table.get(&a.checked_sub(module.base)?)?;
                Some((a, name.clone()))
            })
            .collect()
    }

    /// Every source frame of a return address (module-relative), innermost
    /// first: the function that holds the call, then each function it was
    /// inlined into, with the line of the call in each. Frames without a
    /// line are left out; empty when the module or its line tables cannot
    /// be read.
    pub fn frames(&mut self, module: &Module, return_offset: u64) -> Vec<(String, String, u32)> {
        if !matches!(
            self.lookup(module, return_offset),
            SymbolizedSite::Found { .. }
        ) {
            return Vec::new();
        }
        let Some(loader) = self.loaders.get(&module.path).and_then(Option::as_ref) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        if let Ok(mut frames) = loader.find_frames(return_offset.saturating_sub(1)) {
            while let Ok(Some(frame)) = frames.next() {
                let function = frame
                    .function
                    .as_ref()
                    .and_then(|f| f.demangle().ok().map(|s| s.into_owned()))
                    .unwrap_or_else(|| "?".into());
                if let Some((Some(file), Some(line))) = frame.location.map(|l| (l.file, l.line)) {
                    out.push((file.to_string(), function, line));
                }
            }
        }
        out
    }

    /// Looks up a return address (module-relative): the call instruction is
    /// the byte before it.
    pub fn lookup(&mut self, module: &Module, return_offset: u64) -> SymbolizedSite {
        if !self.loaders.contains_key(&module.path) {
            let loader = self
                .locate(module)
                .and_then(|p| addr2line::Loader::new(p).ok());
            self.loaders.insert(module.path.clone(), loader);
        }
        let Some(loader) = self.loaders.get(&module.path).and_then(Option::as_ref) else {
            let note = format!(
                "{}: cannot read the binary (or it is another build) for source lines; sites are shown as addresses (--symbols DIR names a directory with a copy)",
                module.path
            );
            if !self.notes.contains(&note) {
                self.notes.push(note);
            }
            return SymbolizedSite::NoDebugInfo { function: None };
        };
        let probe = return_offset.saturating_sub(1);
        let mut function = None;
        let mut location = None;
        if let Ok(mut frames) = loader.find_frames(probe) {
            // The innermost frame is where the call is written in the source.
            if let Ok(Some(frame)) = frames.next() {
                function = frame
                    .function
                    .as_ref()
                    .and_then(|f| f.demangle().ok().map(|s| s.into_owned()));
                location = frame
                    .location
                    .and_then(|l| Some((l.file?.to_string(), l.line)));
            }
        }
        if function.is_none() {
            function = loader.find_symbol(probe).map(str::to_string);
        }
        match location {
            Some((file, line)) => SymbolizedSite::Found {
                file,
                function: function.unwrap_or_else(|| "?".into()),
                line,
            },
            None => {
                let note = format!(
                    "{}: no line information (build with -g for source lines)",
                    module.path
                );
                if !self.notes.contains(&note) {
                    self.notes.push(note);
                }
                SymbolizedSite::NoDebugInfo { function }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fortran_module_variables_read_by_their_own_name() {
        assert_eq!(demangle_data_symbol("__heat_MOD_u"), "u");
        assert_eq!(demangle_data_symbol("Anew"), "Anew");
        // Only gfortran's `__module_MOD_` form is cut.
        assert_eq!(demangle_data_symbol("my_MOD_x"), "my_MOD_x");
    }
}
