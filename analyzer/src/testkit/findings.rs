//! Reading an analysis in tests: findings by rule, their places with file
//! names only, and the combined patch with machine paths cut to
//! `samples/...`, so goldens read the same on every machine.

use std::path::Path;

use crate::analysis;
use crate::findings::{Analysis, Finding};
use crate::source::SourceSet;

/// The findings of rule `id`, in rank order.
pub fn with_id<'a>(a: &'a Analysis, id: &str) -> Vec<&'a Finding> {
    a.findings.iter().filter(|f| f.id == id).collect()
}

/// `role file:line` of each location, with file names only.
pub fn places(f: &Finding) -> Vec<String> {
    f.locations
        .iter()
        .map(|l| {
            let name = Path::new(&l.file)
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or(&l.file);
            format!("{} {name}:{}", l.role, l.line.unwrap_or(0))
        })
        .collect()
}

/// The combined patch of `a`, every finding's change in it, with the
/// paths of its file headers cut to `samples/...`.
pub fn patch_text(a: &Analysis, src: &SourceSet) -> String {
    let c = analysis::combined_patch(a, src);
    assert!(c.skipped.is_empty(), "{:?}", c.skipped);
    let diff = c.patched.expect("a patch").diff;
    diff.lines()
        .map(|l| {
            match (
                l.starts_with("--- ") || l.starts_with("+++ "),
                l.find("samples/"),
            ) {
                (true, Some(i)) => format!("{} {}{}", &l[..3], &l[4..6], &l[i..]),
                _ => l.to_string(),
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}
