//! What a run asks of its sources: the model hands the source set plain
//! data ([`Wanted`]) so that the source set reads no run.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::source::{SourceSet, Wanted};

use super::entities::ConstructClass;
use super::run::Run;

impl Run {
    /// The files this run's sites name, the lines its top-level compute
    /// constructs start at and the executable that ran.
    pub fn wanted_sources(&self) -> Wanted {
        let named = || {
            self.process
                .sites
                .iter()
                .chain(self.process.callers.values().flatten())
        };
        let files = named()
            .filter(|s| s.line.is_some())
            .map(|s| s.file.clone())
            .collect();
        // Each site once: a run reaches its constructs thousands of times
        // (NPB SP class W: 29,303), its sites a few dozen.
        let sites: BTreeSet<_> = self
            .constructs()
            .filter(|(_, c)| c.class == ConstructClass::Compute && c.parent.is_none())
            .map(|(_, c)| c.site)
            .collect();
        let compute_lines = sites
            .into_iter()
            .filter_map(|s| {
                let site = self.site(s);
                Some((site.file.clone(), site.line?))
            })
            .collect();
        let binary = match (self.executable_module(), &self.executable_binary) {
            (Some(exe), Some(binary)) => {
                let of_exe = named()
                    .filter(|s| s.address.as_ref().is_some_and(|(m, _)| *m == exe.path))
                    .map(|s| s.file.clone())
                    .collect();
                Some((binary.clone(), of_exe))
            }
            _ => None,
        };
        Wanted {
            files,
            compute_lines,
            binary,
        }
    }
}

impl SourceSet {
    /// Reads every source file a site of `run` names. A file is looked for
    /// under each of `roots` (by its path relative to the root and by file
    /// name), then at its recorded path.
    pub fn load(run: &Run, roots: &[PathBuf]) -> SourceSet {
        Self::load_with(run, roots, &[], &|p| std::fs::read_to_string(p))
    }

    /// [`SourceSet::load`] with path maps (a recorded path starting with
    /// the first directory is read from the second instead, never from
    /// the recorded path) and the file reading given (tests use it to
    /// make sources missing).
    pub fn load_with(
        run: &Run,
        roots: &[PathBuf],
        maps: &[(PathBuf, PathBuf)],
        read: &dyn Fn(&Path) -> std::io::Result<String>,
    ) -> SourceSet {
        SourceSet::read_wanted(&run.wanted_sources(), roots, maps, read)
    }
}
