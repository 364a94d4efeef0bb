//! Finding the CUDA driver and libcupti and loading them: the search
//! directories, the version checks, and the symbols cudarc will call.

use std::ffi::{c_int, c_void, CStr, CString};
use std::path::{Path, PathBuf};
use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering};

use cudarc::cupti::sys;

use sys::CUptiResult::{CUPTI_ERROR_NOT_COMPATIBLE, CUPTI_ERROR_NOT_INITIALIZED};

/// The soname of the CUPTI this build's bindings describe (cudarc feature
/// cuda-13000). Preferred when a directory holds several names.
const OUR_SONAME: &str = "libcupti.so.13";

/// Library subdirectories of a CUDA toolkit root that may hold libcupti.
#[cfg(target_arch = "aarch64")]
const LIB_SUBDIRS: [&str; 3] = ["lib64", "extras/CUPTI/lib64", "targets/sbsa-linux/lib"];
#[cfg(not(target_arch = "aarch64"))]
const LIB_SUBDIRS: [&str; 3] = ["lib64", "extras/CUPTI/lib64", "targets/x86_64-linux/lib"];

/// The loaded libcupti, kept loaded for the life of the process.
static LIBRARY: AtomicPtr<c_void> = AtomicPtr::new(ptr::null_mut());

/// A libcupti loaded (RTLD_NOW | RTLD_GLOBAL) and kept loaded.
pub(super) struct Loaded {
    handle: *mut c_void,
    pub(super) path: String,
    /// cuptiGetVersion's answer (CUPTI_API_VERSION of the library).
    pub(super) version: u32,
}

fn dl_error() -> String {
    // SAFETY: dlerror returns NULL or a NUL-terminated thread-local string,
    // valid until the next dl* call on this thread; copied at once.
    unsafe {
        let e = libc::dlerror();
        if e.is_null() {
            "unknown error".into()
        } else {
            CStr::from_ptr(e).to_string_lossy().into_owned()
        }
    }
}

/// Checks that the CUDA driver library loads (CUPTI cannot work without it)
/// and returns its CUDA version (e.g. 13000) when it says. The handle stays
/// open: CUPTI and the runtime load the driver next, and closing it here
/// would unload it only for them to load it again (about a millisecond).
pub(super) fn probe_driver() -> Result<Option<i32>, String> {
    let name = c"libcuda.so.1";
    // SAFETY: dlopen with a NUL-terminated name; RTLD_NOLOAD only looks.
    let mut h = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_LAZY | libc::RTLD_NOLOAD) };
    if h.is_null() {
        // SAFETY: as above; loading the driver runs no CUDA code.
        h = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_LAZY | libc::RTLD_LOCAL) };
    }
    if h.is_null() {
        let err = dl_error();
        return Err(
            if err.contains("No such file") || err.contains("cannot open") {
                "no CUDA driver (libcuda.so.1 not found)".into()
            } else {
                format!("no CUDA driver (libcuda.so.1 could not be loaded: {err})")
            },
        );
    }
    // SAFETY: `h` is a live handle; the name is NUL-terminated.
    let sym = unsafe { libc::dlsym(h, c"cuDriverGetVersion".as_ptr()) };
    let mut version: c_int = 0;
    let ok = !sym.is_null() && {
        type GetVersion = unsafe extern "C" fn(*mut c_int) -> c_int;
        // SAFETY: cuDriverGetVersion(int*) -> CUresult, callable before
        // cuInit; the pointer is to our local.
        unsafe {
            let f: GetVersion = std::mem::transmute::<*mut c_void, GetVersion>(sym);
            f(&mut version) == 0
        }
    };
    Ok(ok.then_some(version))
}

/// Where to look for libcupti: the environment and the toolkits installed.
#[derive(Debug, Clone, Default)]
pub(crate) struct SearchEnv {
    /// $CUDA_HOME, $CUDA_PATH (toolkit roots named by the user).
    pub cuda_homes: Vec<String>,
    pub ld_library_path: Option<String>,
    /// /usr/local/cuda-* directories.
    pub versioned_toolkits: Vec<PathBuf>,
    /// /opt/nvidia/hpc_sdk/Linux_x86_64/*/cuda/* directories.
    pub hpc_sdk_toolkits: Vec<PathBuf>,
}

impl SearchEnv {
    fn from_system() -> SearchEnv {
        let var = |n: &str| std::env::var(n).ok().filter(|v| !v.is_empty());
        let cuda_homes = ["CUDA_HOME", "CUDA_PATH"]
            .iter()
            .filter_map(|n| var(n))
            .collect();
        let versioned_toolkits = list_dir(Path::new("/usr/local"))
            .into_iter()
            .filter(|p| file_name(p).starts_with("cuda-"))
            .collect();
        let arch = if cfg!(target_arch = "aarch64") {
            "Linux_aarch64"
        } else {
            "Linux_x86_64"
        };
        let hpc_sdk_toolkits = list_dir(&Path::new("/opt/nvidia/hpc_sdk").join(arch))
            .into_iter()
            .flat_map(|sdk| list_dir(&sdk.join("cuda")))
            .filter(|p| file_name(p).starts_with(|c: char| c.is_ascii_digit()))
            .collect();
        SearchEnv {
            cuda_homes,
            ld_library_path: var("LD_LIBRARY_PATH"),
            versioned_toolkits,
            hpc_sdk_toolkits,
        }
    }
}

fn list_dir(dir: &Path) -> Vec<PathBuf> {
    match std::fs::read_dir(dir) {
        Ok(entries) => entries.filter_map(|e| e.ok().map(|e| e.path())).collect(),
        Err(_) => Vec::new(),
    }
}

fn file_name(p: &Path) -> &str {
    p.file_name().and_then(|n| n.to_str()).unwrap_or("")
}

/// "13.0" or "cuda-12.9" -> [13, 0] / [12, 9]; [] when not a version.
fn version_of(name: &str) -> Vec<u32> {
    name.trim_start_matches("cuda-")
        .split('.')
        .map(str::parse::<u32>)
        .collect::<Result<Vec<_>, _>>()
        .unwrap_or_default()
}

/// Toolkits the driver supports first, newest first within each group (an
/// HPC SDK's own version breaks ties).
fn order_toolkits(mut roots: Vec<PathBuf>, driver: Option<i32>) -> Vec<PathBuf> {
    let limit = driver.map(|d| (d / 1000, (d % 1000) / 10));
    let key = |p: &PathBuf| {
        let v = version_of(file_name(p));
        let fits = match (limit, v.as_slice()) {
            (None, _) => true,
            (Some((dm, dn)), [m, n, ..]) => {
                (i64::from(*m), i64::from(*n)) <= (i64::from(dm), i64::from(dn))
            }
            (Some(_), _) => false,
        };
        let sdk = p
            .parent()
            .and_then(Path::parent)
            .map(|s| version_of(file_name(s)))
            .unwrap_or_default();
        (fits, v, sdk)
    };
    roots.sort_by_key(|p| std::cmp::Reverse(key(p)));
    roots
}

/// Directories searched for libcupti, in order: $CUDA_HOME / $CUDA_PATH,
/// /usr/local/cuda, /usr/local/cuda-*, the HPC SDK's toolkits (each with
/// its library subdirectories), then each directory of LD_LIBRARY_PATH.
pub(crate) fn search_dirs(env: &SearchEnv, driver: Option<i32>) -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = env.cuda_homes.iter().map(PathBuf::from).collect();
    roots.push(PathBuf::from("/usr/local/cuda"));
    roots.extend(order_toolkits(env.versioned_toolkits.clone(), driver));
    roots.extend(order_toolkits(env.hpc_sdk_toolkits.clone(), driver));
    let mut dirs: Vec<PathBuf> = roots
        .iter()
        .flat_map(|r| LIB_SUBDIRS.iter().map(move |s| r.join(s)))
        .collect();
    if let Some(lp) = &env.ld_library_path {
        dirs.extend(lp.split(':').filter(|d| !d.is_empty()).map(PathBuf::from));
    }
    let mut seen = std::collections::HashSet::new();
    dirs.retain(|d| seen.insert(d.clone()));
    dirs
}

/// Orders the libcupti file names of one directory: this build's soname
/// first, then other sonames (libcupti.so.N), the development link, and
/// fully versioned files last (they are what the links point to anyway).
fn rank_library_names(mut names: Vec<String>) -> Vec<String> {
    names.retain(|n| n.starts_with("libcupti.so"));
    let rank = |n: &str| {
        if n == OUR_SONAME {
            0
        } else if n
            .strip_prefix("libcupti.so.")
            .is_some_and(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
        {
            1
        } else if n == "libcupti.so" {
            2
        } else {
            3
        }
    };
    names.sort_by(|a, b| rank(a).cmp(&rank(b)).then_with(|| b.cmp(a)));
    names
}

/// Library files to try, in order, without duplicates of the same file.
fn library_files(dirs: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for dir in dirs {
        let names = list_dir(dir)
            .iter()
            .map(|p| file_name(p).to_string())
            .collect();
        for name in rank_library_names(names) {
            let path = dir.join(&name);
            let id = std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
            if seen.insert(id) {
                out.push(path);
            }
        }
    }
    out
}

fn dlopen_path(path: &Path, flags: c_int) -> *mut c_void {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = CString::new(path.as_os_str().as_bytes()) else {
        return ptr::null_mut();
    };
    // SAFETY: dlopen with a NUL-terminated path. Loading libcupti runs no
    // CUPTI initialization (that happens on the first CUPTI call).
    unsafe { libc::dlopen(c.as_ptr(), flags) }
}

pub(super) fn dlopen_name(name: &str, flags: c_int) -> *mut c_void {
    dlopen_path(Path::new(name), flags)
}

/// The file a handle was loaded from, found through one of its symbols.
fn object_path(handle: *mut c_void, symbol: &CStr) -> Option<String> {
    // SAFETY: `handle` is live; the name is NUL-terminated.
    let sym = unsafe { libc::dlsym(handle, symbol.as_ptr()) };
    if sym.is_null() {
        return None;
    }
    crate::callsite::object_of(sym.cast_const())
}

/// Finds libcupti and loads it: the one already in the process if any (the
/// program or another tool loaded it), else the first file of the search
/// directories that loads, else whatever the dynamic loader finds by name.
pub(super) fn load_cupti(driver: Option<i32>) -> Result<Loaded, String> {
    let names = cudarc::get_lib_name_candidates("cupti");
    let mut handle = names
        .iter()
        .map(|n| dlopen_name(n, libc::RTLD_NOW | libc::RTLD_GLOBAL | libc::RTLD_NOLOAD))
        .find(|h| !h.is_null())
        .unwrap_or(ptr::null_mut());

    let dirs = search_dirs(&SearchEnv::from_system(), driver);
    let mut failures = Vec::new();
    if handle.is_null() {
        for file in library_files(&dirs) {
            let h = dlopen_path(&file, libc::RTLD_NOW | libc::RTLD_GLOBAL);
            if h.is_null() {
                failures.push(format!("{}: {}", file.display(), dl_error()));
            } else {
                handle = h;
                break;
            }
        }
    }
    if handle.is_null() {
        handle = names
            .iter()
            .map(|n| dlopen_name(n, libc::RTLD_NOW | libc::RTLD_GLOBAL))
            .find(|h| !h.is_null())
            .unwrap_or(ptr::null_mut());
    }
    if handle.is_null() {
        if let Some(first) = failures.first() {
            return Err(format!("libcupti could not be loaded ({first})"));
        }
        let existing: Vec<String> = dirs
            .iter()
            .filter(|d| d.is_dir())
            .map(|d| d.display().to_string())
            .collect();
        return Err(if existing.is_empty() {
            "libcupti not found (no CUDA toolkit directory among $CUDA_HOME, $CUDA_PATH, /usr/local/cuda*, /opt/nvidia/hpc_sdk, LD_LIBRARY_PATH; none on the system library path either)".into()
        } else {
            format!(
                "libcupti not found (searched: {} and the system library path)",
                existing.join(", ")
            )
        });
    }
    LIBRARY.store(handle, Ordering::Release);
    let path = object_path(handle, c"cuptiGetVersion").unwrap_or_else(|| "(unknown path)".into());

    // SAFETY: `handle` is live; the name is NUL-terminated.
    let sym = unsafe { libc::dlsym(handle, c"cuptiGetVersion".as_ptr()) };
    if sym.is_null() {
        return Err(format!(
            "{path} is not a usable libcupti (no cuptiGetVersion)"
        ));
    }
    let mut version: u32 = 0;
    type GetVersion = unsafe extern "C" fn(*mut u32) -> u32;
    // SAFETY: cuptiGetVersion(uint32_t*) -> CUptiResult; our local is the
    // out pointer. The result is read as a plain integer.
    let r = unsafe { std::mem::transmute::<*mut c_void, GetVersion>(sym)(&mut version) };
    if r != 0 {
        return Err(format!("cuptiGetVersion failed in {path} (error {r})"));
    }
    readable_api_version(version).map_err(|why| format!("libcupti at {path}: {why}"))?;
    Ok(Loaded {
        handle,
        path,
        version,
    })
}

/// Whether this build can read the activity records of a CUPTI with this
/// API version. Every field read here sits at the same offset in the
/// records of CUPTI 11.8 through 13.x (new versions only append fields).
fn readable_api_version(v: u32) -> Result<(), String> {
    match v {
        18..=99 | 130_000..=139_999 => Ok(()),
        0..=17 => Err(format!(
            "CUPTI API version {v} is older than CUDA 11.8, whose records this build reads"
        )),
        _ => Err(format!(
            "CUPTI API version {v} is newer than the CUDA 13 records this build knows"
        )),
    }
}

/// The CUDA version a CUPTI API version comes from, where known.
fn cupti_cuda_version(v: u32) -> Option<(u32, u32)> {
    match v {
        130_000..=139_999 => Some((v / 10_000, (v / 100) % 100)),
        20 => Some((12, 2)),
        21 => Some((12, 3)),
        22 => Some((12, 4)),
        23 => Some((12, 5)),
        24 => Some((12, 6)),
        26 => Some((12, 8)),
        28 => Some((12, 9)),
        _ => None,
    }
}

/// cudarc's loader takes the first of its candidate names that dlopen
/// accepts. Walk the same names with the same flags: the first that loads
/// must be our object, or cudarc would call into another libcupti (or panic
/// finding none).
pub(super) fn check_cudarc_binds(lib: &Loaded) -> Result<(), String> {
    for name in cudarc::get_lib_name_candidates("cupti") {
        // Same flags as libloading::Library::new.
        let h = dlopen_name(&name, libc::RTLD_LAZY | libc::RTLD_LOCAL);
        if h.is_null() {
            continue;
        }
        let same = h == lib.handle;
        let other = if same {
            String::new()
        } else {
            object_path(h, c"cuptiGetVersion").unwrap_or_else(|| "another object".into())
        };
        // SAFETY: drops the reference this probe took; our own handle keeps
        // the library loaded when it is the same object.
        unsafe { libc::dlclose(h) };
        return if same {
            Ok(())
        } else {
            Err(format!(
                "cudarc's loader would bind {name} to {other}, not to the libcupti loaded from {}",
                lib.path
            ))
        };
    }
    Err(format!(
        "the libcupti at {} is not reachable under any name cudarc's loader tries (its soname is not {OUR_SONAME} or another known one)",
        lib.path
    ))
}

/// cudarc panics on a missing symbol: check every one used before calling.
pub(super) fn check_symbols(lib: &Loaded) -> Result<(), String> {
    const REQUIRED: [&CStr; 10] = [
        c"cuptiSubscribe",
        c"cuptiUnsubscribe",
        c"cuptiEnableCallback",
        c"cuptiActivityRegisterCallbacks",
        c"cuptiActivityEnable",
        c"cuptiActivityDisable",
        c"cuptiActivityGetNextRecord",
        c"cuptiActivityGetNumDroppedRecords",
        c"cuptiActivityFlushAll",
        c"cuptiGetTimestamp",
    ];
    for name in REQUIRED {
        if !has_symbol(lib, name) {
            return Err(format!(
                "libcupti at {} lacks {}",
                lib.path,
                name.to_string_lossy()
            ));
        }
    }
    Ok(())
}

pub(super) fn has_symbol(lib: &Loaded, name: &CStr) -> bool {
    // SAFETY: `lib.handle` is live (never closed); the name is NUL-terminated.
    !unsafe { libc::dlsym(lib.handle, name.as_ptr()) }.is_null()
}

/// "13.0" from the driver's 13000.
pub(super) fn format_cuda_version(v: i32) -> String {
    format!("{}.{}", v / 1000, (v % 1000) / 10)
}

/// A hint for subscribe failures that mean "driver older than this CUPTI".
pub(super) fn driver_hint(r: sys::CUptiResult, lib: &Loaded, driver: Option<i32>) -> String {
    if r != CUPTI_ERROR_NOT_INITIALIZED && r != CUPTI_ERROR_NOT_COMPATIBLE {
        return String::new();
    }
    match (cupti_cuda_version(lib.version), driver) {
        (Some((maj, min)), Some(d)) => format!(
            " (libcupti at {} is from CUDA {maj}.{min}; the driver supports CUDA {}: the driver may be too old for it)",
            lib.path,
            format_cuda_version(d)
        ),
        _ => format!(" (the CUDA driver may be too old for the libcupti at {})", lib.path),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn search_dirs_follow_the_documented_order() {
        let env = SearchEnv {
            cuda_homes: vec!["/opt/cuda".into()],
            ld_library_path: Some("/a/lib::/usr/local/cuda/lib64:/b".into()),
            versioned_toolkits: vec![
                "/usr/local/cuda-12.9".into(),
                "/usr/local/cuda-13.2".into(),
                "/usr/local/cuda-13.0".into(),
                "/usr/local/cuda-x".into(),
            ],
            hpc_sdk_toolkits: vec![
                "/opt/nvidia/hpc_sdk/Linux_x86_64/25.1/cuda/12.6".into(),
                "/opt/nvidia/hpc_sdk/Linux_x86_64/25.7/cuda/12.9".into(),
                "/opt/nvidia/hpc_sdk/Linux_x86_64/25.7/cuda/13.0".into(),
            ],
        };
        let dirs = search_dirs(&env, Some(13000));
        let s: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
        let sub = LIB_SUBDIRS[2];
        let mut want = Vec::new();
        for root in [
            "/opt/cuda",
            "/usr/local/cuda",
            // Toolkits the 13.0 driver supports first, newest first.
            "/usr/local/cuda-13.0",
            "/usr/local/cuda-12.9",
            "/usr/local/cuda-13.2",
            "/usr/local/cuda-x",
            "/opt/nvidia/hpc_sdk/Linux_x86_64/25.7/cuda/13.0",
            "/opt/nvidia/hpc_sdk/Linux_x86_64/25.7/cuda/12.9",
            "/opt/nvidia/hpc_sdk/Linux_x86_64/25.1/cuda/12.6",
        ] {
            for d in LIB_SUBDIRS {
                want.push(format!("{root}/{d}"));
            }
        }
        // LD_LIBRARY_PATH last; empty entries skipped, duplicates dropped.
        want.push("/a/lib".into());
        want.push("/b".into());
        assert_eq!(s, want);
        assert!(s.iter().any(|d| d.ends_with(sub)));

        // Without a driver version: newest first.
        let dirs = search_dirs(&env, None);
        let roots: Vec<String> = dirs
            .iter()
            .step_by(LIB_SUBDIRS.len())
            .map(|d| d.display().to_string())
            .collect();
        assert!(roots[2].starts_with("/usr/local/cuda-13.2/"));
        assert!(roots[3].starts_with("/usr/local/cuda-13.0/"));

        // Nothing set: /usr/local/cuda only.
        let dirs = search_dirs(&SearchEnv::default(), None);
        assert_eq!(dirs.len(), LIB_SUBDIRS.len());
        assert!(dirs.iter().all(|d| d.starts_with("/usr/local/cuda")));
    }

    #[test]
    fn library_names_rank_our_soname_first() {
        let names = vec![
            "libcupti.so".to_string(),
            "libcupti.so.2025.3.0".into(),
            "libcupti_static.a".into(),
            "libcupti.so.12".into(),
            "libcupti.so.13".into(),
        ];
        assert_eq!(
            rank_library_names(names),
            vec![
                "libcupti.so.13",
                "libcupti.so.12",
                "libcupti.so",
                "libcupti.so.2025.3.0"
            ]
        );
    }

    #[test]
    fn api_versions() {
        assert!(readable_api_version(130_001).is_ok());
        assert!(readable_api_version(130_401).is_ok());
        assert!(readable_api_version(28).is_ok());
        assert!(readable_api_version(18).is_ok());
        assert!(readable_api_version(14).is_err());
        assert!(readable_api_version(140_001).is_err());
        assert_eq!(cupti_cuda_version(130_001), Some((13, 0)));
        assert_eq!(cupti_cuda_version(130_202), Some((13, 2)));
        assert_eq!(cupti_cuda_version(24), Some((12, 6)));
        assert_eq!(format_cuda_version(13000), "13.0");
        assert_eq!(format_cuda_version(12090), "12.9");
    }
}
