//! The launcher's manifest: when `ACCPROF_MANIFEST` names a file, each
//! trace this process opens is announced there with one appended line
//! (`contract::manifest_line`), so `accprof run` learns the real names of
//! the traces its process tree wrote.

use std::ffi::CString;

use accprof_trace::contract;

/// Appends this process's line for the trace at `path` (made absolute
/// against the working directory). Failing to is said once and otherwise
/// ignored: the trace itself is still written.
pub(crate) fn record(path: &str) {
    let Some(manifest) = std::env::var_os(contract::env::MANIFEST) else {
        return;
    };
    if manifest.is_empty() {
        return;
    }
    let abs = if std::path::Path::new(path).is_absolute() {
        path.to_string()
    } else {
        match std::env::current_dir() {
            Ok(cwd) => cwd.join(path).display().to_string(),
            Err(_) => path.to_string(),
        }
    };
    let line = contract::manifest_line(std::process::id(), &abs);
    use std::os::unix::ffi::OsStrExt;
    let Ok(name) = CString::new(manifest.as_bytes()) else {
        return;
    };
    // SAFETY: a NUL-terminated path; the descriptor is ours, written once
    // from a valid buffer and closed. O_APPEND makes each line one atomic
    // append even with several processes writing.
    let result = unsafe {
        let fd = libc::open(
            name.as_ptr(),
            libc::O_WRONLY | libc::O_APPEND | libc::O_CREAT | libc::O_CLOEXEC,
            0o600 as libc::c_uint,
        );
        if fd < 0 {
            Err(std::io::Error::last_os_error())
        } else {
            let n = libc::write(fd, line.as_ptr().cast(), line.len());
            let e = std::io::Error::last_os_error();
            libc::close(fd);
            match n {
                n if n == line.len() as isize => Ok(()),
                n if n < 0 => Err(e),
                _ => Err(std::io::Error::new(
                    std::io::ErrorKind::WriteZero,
                    "short write",
                )),
            }
        }
    };
    if let Err(e) = result {
        crate::note::error(&format!(
            "cannot add {abs} to the manifest {}: {e}",
            manifest.to_string_lossy()
        ));
    }
}
