//! Where a trace goes: the output pattern expanded and made absolute, a name
//! no file holds yet (an existing trace is never replaced: not an earlier
//! run's, not the parent's of a forked child, not the one an exec'd image
//! left under the same pid), and the manifest line that tells the launcher
//! where it went.

use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use accprof_trace::contract;

use crate::note;

/// Numbered names tried after the one asked for.
const MAX_TRIES: u32 = 10_000;

/// Set in a forked child (and its children).
static FORKED_CHILD: AtomicBool = AtomicBool::new(false);

pub(crate) fn mark_forked_child() {
    FORKED_CHILD.store(true, Ordering::Release);
}

/// `path` with `.tag` inserted before its extension (`t.trace` -> `t.1.trace`),
/// or appended when it has none.
fn tagged(path: &Path, tag: &str) -> PathBuf {
    let mut name = OsString::new();
    match (path.file_stem(), path.extension()) {
        (Some(stem), Some(ext)) => {
            name.push(stem);
            name.push(format!(".{tag}."));
            name.push(ext);
        }
        _ => {
            name.push(path.file_name().unwrap_or_default());
            name.push(format!(".{tag}"));
        }
    }
    path.with_file_name(name)
}

/// The name the pattern asks for: expanded, made absolute, and for a forked
/// child whose pattern names one file for every process, its own.
fn asked_for(pid: u32, host: &str, rank: Option<u32>, forked: bool) -> PathBuf {
    let cfg = crate::config::config();
    let expanded = contract::expand_output(&cfg.output, pid, host, rank, |p| {
        cfg.resolve(Path::new(p)).exists()
    });
    let path = cfg.resolve(Path::new(&expanded));
    if forked && !contract::pattern_is_per_process(&cfg.output) {
        tagged(&path, &format!("child-{pid}"))
    } else {
        path
    }
}

/// Creates this process's trace file under the first free name: the one
/// asked for, else the same with `.1`, `.2`, ... before the extension.
/// Says so in one line when the name is not the one the pattern gives.
pub(crate) fn create(pid: u32, host: &str, rank: Option<u32>) -> Result<(File, PathBuf), String> {
    let forked = FORKED_CHILD.load(Ordering::Acquire);
    let say = |taken: Option<&Path>, got: &Path| {
        let cfg = crate::config::config();
        let mut why = Vec::new();
        if forked && !contract::pattern_is_per_process(&cfg.output) {
            why.push(format!(
                "forked child {pid} writes its own trace (the output pattern {} names one file for every process)",
                cfg.output.to_string_lossy()
            ));
        }
        if let Some(taken) = taken {
            why.push(format!("{} exists and is kept", taken.display()));
        }
        if !why.is_empty() {
            note::info(&format!(
                "{}; trace goes to {}",
                why.join("; "),
                got.display()
            ));
        }
    };
    // A pattern with %n gives a new name once the one it gave is taken (by
    // a process that created it since): ask it again. Any other gives the
    // same name again: number that.
    let mut previous: Option<PathBuf> = None;
    loop {
        let asked = asked_for(pid, host, rank, forked);
        if previous.as_ref() == Some(&asked) {
            return create_free(&asked, say);
        }
        match new_file(&asked) {
            Ok(f) => {
                say(None, &asked);
                return Ok((f, asked));
            }
            Err(e) if e.kind() == ErrorKind::AlreadyExists => previous = Some(asked),
            Err(e) => return Err(format!("cannot create trace {}: {e}", asked.display())),
        }
    }
}

/// Creates `path`, failing if anything is there (O_EXCL).
fn new_file(path: &Path) -> std::io::Result<File> {
    OpenOptions::new().write(true).create_new(true).open(path)
}

/// Creates `asked`, or the first numbered variant of it that does not
/// exist (O_EXCL: two processes never get the same name); `said` learns the
/// name it tried first when that was taken, and the name it got.
fn create_free(
    asked: &Path,
    said: impl FnOnce(Option<&Path>, &Path),
) -> Result<(File, PathBuf), String> {
    for n in 0..=MAX_TRIES {
        let path = if n == 0 {
            asked.to_path_buf()
        } else {
            tagged(asked, &n.to_string())
        };
        match new_file(&path) {
            Ok(f) => {
                said((n > 0).then_some(asked), &path);
                return Ok((f, path));
            }
            Err(e) if e.kind() == ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(format!("cannot create trace {}: {e}", path.display())),
        }
    }
    Err(format!(
        "cannot create trace {}: it and {MAX_TRIES} numbered variants exist",
        asked.display()
    ))
}

/// Appends this trace's line to the manifest, when the launcher asked for
/// one: one write(2) on an O_APPEND descriptor, so lines of processes
/// writing at once never interleave.
pub(crate) fn add_to_manifest(pid: u32, trace: &Path) {
    let Some(manifest) = &crate::config::config().manifest else {
        return;
    };
    let line = contract::manifest_line(pid, trace);
    let res = OpenOptions::new()
        .append(true)
        .create(true)
        .custom_flags(libc::O_CLOEXEC)
        .open(manifest)
        .and_then(|mut f| {
            let n = f.write(&line)?;
            if n == line.len() {
                Ok(())
            } else {
                Err(std::io::Error::new(ErrorKind::WriteZero, "short write"))
            }
        });
    if let Err(e) = res {
        note::error(&format!(
            "cannot add {} to the manifest {}: {e}",
            trace.display(),
            manifest.display()
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_go_before_the_extension() {
        assert_eq!(
            tagged(Path::new("/d/t.trace"), "1"),
            Path::new("/d/t.1.trace")
        );
        assert_eq!(
            tagged(Path::new("/d/a.b.trace"), "child-7"),
            Path::new("/d/a.b.child-7.trace")
        );
        assert_eq!(tagged(Path::new("/d/out"), "2"), Path::new("/d/out.2"));
        assert_eq!(
            tagged(Path::new("/d/.trace"), "2"),
            Path::new("/d/.trace.2")
        );
    }

    #[test]
    fn an_existing_file_is_kept_and_the_next_free_name_taken() {
        let dir = tempdir();
        let asked = dir.join("t.trace");
        std::fs::write(&asked, b"old").expect("write");
        std::fs::write(dir.join("t.1.trace"), b"older").expect("write");
        let mut seen = None;
        let (_f, got) = create_free(&asked, |taken, got| {
            seen = Some((taken.map(Path::to_path_buf), got.to_path_buf()))
        })
        .expect("creates");
        assert_eq!(got, dir.join("t.2.trace"));
        assert_eq!(seen, Some((Some(asked.clone()), got.clone())));
        assert_eq!(std::fs::read(&asked).expect("read"), b"old");
        assert_eq!(
            std::fs::read(dir.join("t.1.trace")).expect("read"),
            b"older"
        );
        let (_f, first) = create_free(&dir.join("u.trace"), |taken, _| assert!(taken.is_none()))
            .expect("creates");
        assert_eq!(first, dir.join("u.trace"));
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }

    fn tempdir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "accprof-output-test-{}-{}",
            std::process::id(),
            crate::clock::now_ns()
        ));
        std::fs::create_dir_all(&dir).expect("mkdir");
        dir
    }
}
