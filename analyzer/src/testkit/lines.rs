//! Where a program's line tables put a source line: what a fault or a
//! call at that line would report, for tests that build traces of real
//! binaries by hand.

use accprof_trace::Module;

use crate::symbolize::{SymbolizedSite, Symbolizer};

/// The first offset in `module`'s text whose instruction the line tables
/// put at `line` of the file whose path ends with `file`.
pub fn instruction_at(module: &Module, file: &str, line: u32) -> u64 {
    let mut s = Symbolizer::new();
    (module.text_start..module.text_end)
        .find(|&off| {
            matches!(
                s.lookup(module, off + 1),
                SymbolizedSite::Found { line: Some(l), file: ref f, .. }
                    if l == line && f.ends_with(file)
            )
        })
        .unwrap_or_else(|| panic!("no instruction at {file}:{line}"))
}
