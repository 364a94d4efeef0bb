//! The user's source while the tuner patches it in place, and what a
//! killed tuner left of it.
//!
//! Before the first patch is written, the original is copied beside the
//! source as `.NAME.accprof-orig` (see [`backup_path`]) with the source's
//! access and modification times, and flushed to disk with its directory:
//! a process killed with SIGKILL (or a machine that loses power) cannot
//! restore anything itself, and the next run that touches the file repairs
//! it from that copy ([`repair`]). [`InPlace::restore`] writes the
//! original back, gives it its times again (a build that compares times,
//! and `accprof analyze`, see the file as untouched) and removes the copy.
//! The copy holds the times as its own: its modification time stays, its
//! access time is the original's unless something read the copy since.
//!
//! A run that patches the source first [`claim`]s it: an exclusive `flock`
//! on the file, which the kernel drops when the process ends however it
//! ends, so that a copy beside a source nobody holds is a killed run's
//! leftover, and a second run on the same file is refused instead of
//! taking the first one's patch for the original.

use std::fs::{File, FileTimes};
use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use rustix::fs::FlockOperation;
use rustix::io::Errno;

use crate::error::Error;

/// Where the original of `source` is kept while it is patched: a hidden
/// file beside it, `.NAME.accprof-orig`.
pub fn backup_path(source: &Path) -> PathBuf {
    let mut name = std::ffi::OsString::from(".");
    name.push(source.file_name().unwrap_or_default());
    name.push(".accprof-orig");
    source.with_file_name(name)
}

/// A source file's access and modification times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Times {
    pub accessed: SystemTime,
    pub modified: SystemTime,
}

impl Times {
    pub fn of(path: &Path) -> Result<Times, Error> {
        let m = std::fs::metadata(path)
            .map_err(|e| io(format!("cannot read {}", path.display()), e))?;
        let times = m.accessed().and_then(|a| Ok((a, m.modified()?)));
        let (accessed, modified) =
            times.map_err(|e| io(format!("cannot read the times of {}", path.display()), e))?;
        Ok(Times { accessed, modified })
    }

    fn set(&self, file: &File, path: &Path) -> Result<(), Error> {
        let t = FileTimes::new()
            .set_accessed(self.accessed)
            .set_modified(self.modified);
        file.set_times(t)
            .map_err(|e| io(format!("cannot set the times of {}", path.display()), e))
    }
}

fn io(what: String, source: std::io::Error) -> Error {
    Error::Io { what, source }
}

/// Writes `bytes` over `path` (the same file: its owner, mode and links
/// stay) and sets `times` on it.
fn write_with_times(path: &Path, bytes: &[u8], times: Option<&Times>) -> Result<(), Error> {
    let mut f =
        File::create(path).map_err(|e| io(format!("cannot write {}", path.display()), e))?;
    f.write_all(bytes)
        .map_err(|e| io(format!("cannot write {}", path.display()), e))?;
    if let Some(t) = times {
        t.set(&f, path)?;
    }
    Ok(())
}

/// Flushes the directory holding `path`, so that a file created in it
/// survives a crash.
fn sync_dir(path: &Path) -> Result<(), Error> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io(format!("cannot flush the directory {}", dir.display()), e))
}

/// The source file, patched in place while a sweep builds it.
#[derive(Debug)]
pub struct InPlace {
    path: PathBuf,
    original: Vec<u8>,
    times: Times,
    /// The file holds a patch now.
    patched: bool,
    /// The backup exists (from the first patch until restored).
    saved: bool,
    /// On restore, leave the source newer than a program built from a
    /// patched text where the build puts it (a build without `{out}`),
    /// so that the user's build remakes it.
    pub keep_newer: bool,
}

impl InPlace {
    /// `original` is the source's content and `times` its times, read
    /// before anything was written (reading it may change its access
    /// time: take the times first).
    pub fn new(path: &Path, original: Vec<u8>, times: Times) -> InPlace {
        InPlace {
            path: path.to_path_buf(),
            original,
            times,
            patched: false,
            saved: false,
            keep_newer: false,
        }
    }

    /// Writes `text` over the source, the original saved beside it first.
    pub fn write(&mut self, text: &str) -> Result<(), Error> {
        if !self.saved {
            self.save()?;
        }
        self.patched = true;
        std::fs::write(&self.path, text).map_err(|e| {
            io(
                format!("cannot write the patched {}", self.path.display()),
                e,
            )
        })
    }

    /// The backup: the original's bytes and times, on disk before the
    /// source is touched. One left by another run is not overwritten: it
    /// may be the only copy of the original.
    fn save(&mut self) -> Result<(), Error> {
        let backup = backup_path(&self.path);
        let what = || {
            format!(
                "cannot keep the original of {} in {}",
                self.path.display(),
                backup.display()
            )
        };
        // Readable by the owner only, whatever the source's mode: the
        // restore writes its bytes into the source, which keeps its own.
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&backup)
            .map_err(|e| {
                if e.kind() == std::io::ErrorKind::AlreadyExists {
                    Error::Tune(format!(
                        "{} exists: the original of {} kept by another accprof run (still running, or killed: then the next run restores it)",
                        backup.display(),
                        self.path.display()
                    ))
                } else {
                    io(what(), e)
                }
            })?;
        self.saved = true;
        f.write_all(&self.original).map_err(|e| io(what(), e))?;
        self.times.set(&f, &backup)?;
        f.sync_all().map_err(|e| io(what(), e))?;
        sync_dir(&backup)
    }

    /// The original's bytes back between two builds; its times stay those
    /// of the write (a build that compares times sees a change) and the
    /// backup stays until [`InPlace::restore`].
    pub fn unpatch(&mut self) -> Result<(), Error> {
        if self.patched {
            std::fs::write(&self.path, &self.original)
                .map_err(|e| io(format!("cannot restore {}", self.path.display()), e))?;
            self.patched = false;
        }
        Ok(())
    }

    /// The original back with its times, and the backup removed.
    pub fn restore(&mut self) -> Result<(), Error> {
        if !self.saved {
            return Ok(());
        }
        let times = (!self.keep_newer).then_some(&self.times);
        write_with_times(&self.path, &self.original, times).map_err(|e| match e {
            Error::Io { source, .. } => {
                io(format!("cannot restore {}", self.path.display()), source)
            }
            e => e,
        })?;
        self.patched = false;
        let backup = backup_path(&self.path);
        std::fs::remove_file(&backup)
            .map_err(|e| io(format!("cannot remove {}", backup.display()), e))?;
        self.saved = false;
        Ok(())
    }
}

impl Drop for InPlace {
    fn drop(&mut self) {
        let _ = self.restore();
    }
}

/// A source claimed by this process for patching, until dropped.
#[derive(Debug)]
pub struct Claim {
    _file: File,
}

/// Claims `source` for patching and repairs what a killed run left of it
/// ([`repair`]). Another process holding it (a sweep running now) is an
/// error naming the file. Where the file system has no locks, the claim
/// holds nothing and the repair is done all the same.
pub fn claim(source: &Path) -> Result<(Claim, Option<Repaired>), Error> {
    let file =
        File::open(source).map_err(|e| io(format!("cannot open {}", source.display()), e))?;
    if lock(&file, source, FlockOperation::NonBlockingLockExclusive)? {
        return Err(Error::Tune(format!(
            "{} is being patched by another accprof run (a tune running now): wait for it to end",
            source.display()
        )));
    }
    let repaired = repair(source)?;
    Ok((Claim { _file: file }, repaired))
}

/// Another process holds `source` (a sweep patching it now).
pub fn in_use(source: &Path) -> bool {
    File::open(source)
        .is_ok_and(|f| lock(&f, source, FlockOperation::NonBlockingLockShared).unwrap_or(false))
}

/// Takes the lock `op` on `file`: true when another process holds it.
fn lock(file: &File, path: &Path, op: FlockOperation) -> Result<bool, Error> {
    match rustix::fs::flock(file, op) {
        Ok(()) => Ok(false),
        Err(e) if e == Errno::WOULDBLOCK => Ok(true),
        // No locks on this file system: nothing to learn from them.
        Err(e) if e == Errno::NOLCK || e == Errno::NOTSUP || e == Errno::INVAL => Ok(false),
        Err(e) => Err(io(format!("cannot lock {}", path.display()), e.into())),
    }
}

/// What [`repair`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repaired {
    pub source: PathBuf,
    pub backup: PathBuf,
    /// The source held something else (a patch); false when only its
    /// times were not the original's.
    pub content: bool,
}

impl std::fmt::Display for Repaired {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} was left {} by an accprof run that was killed: restored the original from {}",
            self.source.display(),
            if self.content {
                "patched"
            } else {
                "with the times of a patch"
            },
            self.backup.display()
        )
    }
}

/// Restores `source` from the backup a killed sweep left beside it
/// (bytes and times), and removes the backup. None when there is none.
pub fn repair(source: &Path) -> Result<Option<Repaired>, Error> {
    let backup = backup_path(source);
    // The times first: reading the backup may change its access time.
    let times = match Times::of(&backup) {
        Ok(t) => t,
        Err(Error::Io { source: e, .. }) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(None)
        }
        Err(e) => return Err(e),
    };
    let original =
        std::fs::read(&backup).map_err(|e| io(format!("cannot read {}", backup.display()), e))?;
    let content = std::fs::read(source).ok().as_deref() != Some(original.as_slice());
    write_with_times(source, &original, Some(&times))?;
    std::fs::remove_file(&backup)
        .map_err(|e| io(format!("cannot remove {}", backup.display()), e))?;
    Ok(Some(Repaired {
        source: source.to_path_buf(),
        backup,
        content,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn old_times(path: &Path) -> Times {
        let t = Times {
            accessed: SystemTime::UNIX_EPOCH + Duration::new(1_600_000_000, 123_456_789),
            modified: SystemTime::UNIX_EPOCH + Duration::new(1_500_000_000, 987_654_321),
        };
        let f = File::options().write(true).open(path).expect("open");
        t.set(&f, path).expect("set times");
        t
    }

    #[test]
    fn the_original_is_kept_beside_until_restored_with_its_times() {
        let dir = tempfile::tempdir().expect("temp dir");
        let src = dir.path().join("a.c");
        std::fs::write(&src, "int x = 1;\n").expect("source");
        let times = old_times(&src);
        let backup = backup_path(&src);
        assert_eq!(backup, dir.path().join(".a.c.accprof-orig"));
        // A name that is not UTF-8 keeps its bytes.
        use std::os::unix::ffi::OsStrExt as _;
        let odd = Path::new(std::ffi::OsStr::from_bytes(b"d/\xffx.c"));
        assert_eq!(
            backup_path(odd),
            Path::new(std::ffi::OsStr::from_bytes(b"d/.\xffx.c.accprof-orig"))
        );
        let mut p = InPlace::new(&src, b"int x = 1;\n".to_vec(), times);
        p.write("int x = 2;\n").expect("patch");
        assert_eq!(std::fs::read(&backup).expect("backup"), b"int x = 1;\n");
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&backup)
            .expect("backup")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "the owner's only");
        assert_eq!(Times::of(&backup).expect("times").modified, times.modified);
        p.unpatch().expect("unpatch");
        assert_eq!(std::fs::read(&src).expect("source"), b"int x = 1;\n");
        assert!(backup.exists(), "kept until restored");
        p.write("int x = 3;\n").expect("patch again");
        p.restore().expect("restore");
        // The times before a read, which may set the access time.
        assert_eq!(Times::of(&src).expect("times"), times);
        assert_eq!(std::fs::read(&src).expect("source"), b"int x = 1;\n");
        assert!(!backup.exists());
    }

    #[test]
    fn a_leftover_is_repaired_and_a_second_backup_is_refused() {
        let dir = tempfile::tempdir().expect("temp dir");
        let src = dir.path().join("a.c");
        std::fs::write(&src, "int x = 1;\n").expect("source");
        let times = old_times(&src);
        let mut p = InPlace::new(&src, b"int x = 1;\n".to_vec(), times);
        p.write("int x = 2;\n").expect("patch");
        // What SIGKILL leaves: no restore.
        std::mem::forget(p);
        let mut other = InPlace::new(&src, b"int x = 2;\n".to_vec(), Times::of(&src).expect("t"));
        let e = other.write("int x = 4;\n").err().map(|e| e.to_string());
        assert!(e.is_some_and(|e| e.contains("kept by another accprof run")));
        drop(other);
        assert_eq!(std::fs::read(&src).expect("source"), b"int x = 2;\n");
        let r = repair(&src).expect("repairs").expect("a leftover");
        assert!(r.content);
        assert_eq!(Times::of(&src).expect("times"), times);
        assert_eq!(std::fs::read(&src).expect("source"), b"int x = 1;\n");
        assert!(!backup_path(&src).exists());
        assert_eq!(repair(&src).expect("nothing to do"), None);
    }

    #[test]
    fn a_claimed_source_is_in_use_until_the_claim_ends() {
        let dir = tempfile::tempdir().expect("temp dir");
        let src = dir.path().join("a.c");
        std::fs::write(&src, "int x = 1;\n").expect("source");
        assert!(!in_use(&src));
        let (held, repaired) = claim(&src).expect("claims");
        assert_eq!(repaired, None);
        // flock locks belong to the open file: a second open is another
        // holder, as another process would be.
        assert!(in_use(&src));
        let e = claim(&src).err().map(|e| e.to_string());
        assert!(
            e.as_deref().is_some_and(|e| e.ends_with(
                "is being patched by another accprof run (a tune running now): wait for it to end"
            )),
            "{e:?}"
        );
        drop(held);
        assert!(!in_use(&src));
    }
}
