//! The source set: finding and reading the files a run names.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use super::{Lang, SourceFile};

/// The sources of a run, read once.
#[derive(Debug, Default)]
pub struct SourceSet {
    /// Path prefixes to replace (recorded prefix -> local directory).
    maps: Vec<(PathBuf, PathBuf)>,
    files: HashMap<String, SourceFile>,
    missing: BTreeSet<String>,
    unsupported: BTreeSet<String>,
    /// Files read but not matching the run, with the reason.
    stale: std::collections::BTreeMap<String, String>,
    /// Files read that were modified after the binary that ran was
    /// built, with what was compared: they may not be what ran.
    newer: std::collections::BTreeMap<String, String>,
}

/// How much later than the binary a source may be modified before it is
/// said to be newer: a checkout writes a tree's binaries and sources a
/// moment apart, in either order.
const MTIME_SLACK: std::time::Duration = std::time::Duration::from_secs(10);

/// What a run asks of its sources, as plain data: the files its sites
/// name, the lines its compute constructs start at, and the executable
/// that ran. The model makes one from a run (`SourceSet::load`); the
/// source set reads no run.
#[derive(Debug, Default, Clone)]
pub struct Wanted {
    /// Recorded paths named by a site (or caller) with a line.
    pub files: BTreeSet<String>,
    /// The recorded path and line of each top-level compute construct's
    /// site, each site once, in site order: each must hold a directive.
    pub compute_lines: Vec<(String, u32)>,
    /// The binary that ran, if known, and the recorded paths of its own
    /// sites: sources modified after it was built are said to be newer.
    pub binary: Option<(PathBuf, BTreeSet<String>)>,
}

impl SourceSet {
    /// Reads every file `wanted` names. A file is looked for under each of
    /// `roots` (by its path relative to the root and by file name), then
    /// at its recorded path; a recorded path starting with the first
    /// directory of a pair of `maps` is read from the second instead,
    /// never from the recorded path. `read` reads a file (tests use it to
    /// make sources missing).
    pub fn read_wanted(
        wanted: &Wanted,
        roots: &[PathBuf],
        maps: &[(PathBuf, PathBuf)],
        read: &dyn Fn(&Path) -> std::io::Result<String>,
    ) -> SourceSet {
        let mut set = SourceSet {
            maps: maps.to_vec(),
            ..SourceSet::default()
        };
        for f in &wanted.files {
            set.load_file(f, roots, read);
        }
        set.drop_stale(&wanted.compute_lines);
        if let Some((binary, of_exe)) = &wanted.binary {
            set.find_newer(binary, of_exe);
        }
        set
    }

    /// Sources of the executable modified after the executable itself:
    /// edited since the build (by hand, or by `analyze --in-place`), so
    /// their lines and clauses may not be the ones that ran.
    fn find_newer(&mut self, binary: &Path, of_exe: &BTreeSet<String>) {
        let Ok(built) = std::fs::metadata(binary).and_then(|m| m.modified()) else {
            return;
        };
        for f in of_exe {
            let Some(src) = self.files.get(f) else {
                continue;
            };
            let Ok(changed) = std::fs::metadata(&src.found_at).and_then(|m| m.modified()) else {
                continue;
            };
            if let Ok(after) = changed.duration_since(built) {
                if after > MTIME_SLACK {
                    self.newer.insert(
                        f.to_string(),
                        format!(
                            "{} was modified {} after the binary {} was built",
                            src.found_at.display(),
                            crate::units::duration_ns(
                                after.as_nanos().min(u128::from(u64::MAX)) as u64
                            ),
                            binary.display()
                        ),
                    );
                }
            }
        }
    }

    /// Why `path` may not be the source that ran (modified after the
    /// binary was built), if it is so.
    pub fn newer(&self, path: &str) -> Option<&str> {
        self.newer.get(path).map(String::as_str)
    }

    /// Sources modified after the binary that ran was built, with what
    /// was compared.
    pub fn newer_than_binary(&self) -> impl Iterator<Item = (&str, &str)> {
        self.newer.iter().map(|(f, w)| (f.as_str(), w.as_str()))
    }

    /// A source whose compute-construct lines hold no OpenACC directive is
    /// not the source of this run (it changed since, or it is another
    /// file of that name): it is set aside rather than misread.
    fn drop_stale(&mut self, compute_lines: &[(String, u32)]) {
        let mut stale: Vec<(String, String)> = Vec::new();
        for (file, line) in compute_lines {
            let Some(src) = self.files.get(file) else {
                continue;
            };
            let line = *line;
            if src.directive_at(line).is_none() && !stale.iter().any(|(f, _)| f == file) {
                let text = src.line(line).trim().to_string();
                stale.push((
                    file.clone(),
                    format!("line {line} holds no OpenACC directive (`{text}`)"),
                ));
            }
        }
        for (f, why) in stale {
            self.files.remove(&f);
            self.stale.insert(f, why);
        }
    }

    fn load_file(
        &mut self,
        recorded: &str,
        roots: &[PathBuf],
        read: &dyn Fn(&Path) -> std::io::Result<String>,
    ) {
        let Some(lang) = Lang::of(recorded) else {
            self.unsupported.insert(recorded.to_string());
            return;
        };
        // What the user named wins over what the trace recorded: a mapped
        // prefix replaces the recorded path, and the roots come before it
        // (a file at the recorded path may be another checkout's).
        let mapped = self.maps.iter().find_map(|(from, to)| {
            let rest = Path::new(recorded).strip_prefix(from).ok()?;
            Some(to.join(rest))
        });
        let mut candidates = Vec::new();
        candidates.extend(mapped.clone());
        let rel = Path::new(recorded.trim_start_matches('/'));
        for r in roots {
            candidates.push(r.join(rel));
            if let Some(name) = Path::new(recorded).file_name() {
                candidates.push(r.join(name));
            }
        }
        if mapped.is_none() {
            candidates.push(PathBuf::from(recorded));
        }
        for c in candidates {
            if let Ok(text) = read(&c) {
                let mut file = SourceFile::new(recorded, c, lang, text);
                file.read_includes(read);
                self.files.insert(recorded.to_string(), file);
                return;
            }
        }
        self.missing.insert(recorded.to_string());
    }

    /// A set holding one file given as text (tests, and callers that have
    /// the text already).
    pub fn with_text(path: &str, text: &str) -> SourceSet {
        let mut set = SourceSet::default();
        set.insert(path, text);
        set
    }

    /// Adds the file at `path` with `text`; the headers it includes with
    /// `#include "..."` are read from beside `path`.
    pub fn insert(&mut self, path: &str, text: &str) {
        if let Some(lang) = Lang::of(path) {
            let mut file = SourceFile::new(path, PathBuf::from(path), lang, text.to_string());
            file.read_includes(&|p: &Path| std::fs::read_to_string(p));
            self.files.insert(path.to_string(), file);
        }
    }

    pub fn get(&self, path: &str) -> Option<&SourceFile> {
        self.files.get(path)
    }

    pub fn is_missing(&self, path: &str) -> bool {
        self.missing.contains(path)
    }

    /// Files named by the run that could not be read.
    pub fn missing(&self) -> impl Iterator<Item = &str> {
        self.missing.iter().map(String::as_str)
    }

    /// Files that do not match the run, with the reason.
    pub fn stale(&self) -> impl Iterator<Item = (&str, &str)> {
        self.stale.iter().map(|(f, w)| (f.as_str(), w.as_str()))
    }

    /// One line per file that could not be read.
    pub fn notes(&self) -> Vec<String> {
        let mut notes: Vec<String> = self
            .missing
            .iter()
            .map(|f| {
                format!(
                    "source {f} not found: its findings show lines only, without source-based proposals (--source-dir DIR or --source-map FROM=TO to look elsewhere)"
                )
            })
            .collect();
        notes.extend(self.newer.iter().map(|(f, why)| {
            format!("source {f}: {why}: it may not be what ran, and the findings' lines, clauses and proposals are read from it as it is now")
        }));
        notes.extend(self.stale.iter().map(|(f, why)| {
            format!("source {f} does not match the run: {why}; it changed since the trace was recorded, so its findings show lines only")
        }));
        notes.extend(
            self.unsupported
                .iter()
                .map(|f| format!("source {f}: not C/C++ or Fortran free form; not read")),
        );
        notes
    }
}
