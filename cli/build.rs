//! Builds the collector library (release, without debug info) and has the
//! CLI embed it, so that `cargo install --path cli` alone gives an
//! `accprof` that can run programs: `run` writes the embedded copy to the
//! user's cache when no libaccprof.so is found otherwise (see
//! src/embedded.rs).
//!
//! The nested cargo uses its own target directory inside the outer one:
//! the outer build holds the lock of its own, and the collector's release
//! build is then shared by every profile and by clippy.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("set by cargo"));
    let root = manifest_dir.join("..");
    let collector = root.join("collector/Cargo.toml");
    let generated = out_dir.join("embedded.rs");
    if !collector.is_file() {
        // Built outside the workspace: no collector to embed.
        write(
            &generated,
            "pub const COLLECTOR: Option<(&[u8], &str)> = None;\n",
        );
        return;
    }
    for p in [
        "collector/src",
        "collector/Cargo.toml",
        "trace/src",
        "trace/Cargo.toml",
        "Cargo.toml",
        "Cargo.lock",
    ] {
        println!("cargo:rerun-if-changed={}", root.join(p).display());
    }
    let target_dir = nested_target_dir(&out_dir);
    let target = std::env::var("TARGET").unwrap_or_default();
    let host = std::env::var("HOST").unwrap_or_default();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "--release", "--lib", "--manifest-path"])
        .arg(&collector)
        .arg("--target-dir")
        .arg(&target_dir)
        .env("CARGO_PROFILE_RELEASE_DEBUG", "false")
        .env("CARGO_PROFILE_RELEASE_STRIP", "debuginfo")
        .env_remove("CARGO_TARGET_DIR")
        // Under clippy the outer build runs rustc through clippy-driver:
        // the library is built, not linted (and keeps one fingerprint).
        .env_remove("RUSTC_WORKSPACE_WRAPPER")
        .env_remove("CLIPPY_ARGS")
        .env_remove("CLIPPY_CONF_DIR");
    let mut built = target_dir.clone();
    if !target.is_empty() && target != host {
        cmd.arg("--target").arg(&target);
        built.push(&target);
    }
    let built = built.join("release/libaccprof.so");
    let status = cmd.status().expect("cargo runs");
    assert!(
        status.success(),
        "building the collector library to embed failed (cargo build --release --manifest-path {})",
        collector.display()
    );
    let bytes =
        std::fs::read(&built).unwrap_or_else(|e| panic!("reading {}: {e}", built.display()));
    let copy = out_dir.join("libaccprof.so");
    std::fs::write(&copy, &bytes).unwrap_or_else(|e| panic!("writing {}: {e}", copy.display()));
    write(
        &generated,
        &format!(
            "pub const COLLECTOR: Option<(&[u8], &str)> = Some((include_bytes!({:?}), {:?}));\n",
            copy.display().to_string(),
            format!("{:016x}", fnv1a(&bytes))
        ),
    );
}

/// `<target>/accprof-embed`, from OUT_DIR = `<target>[/<triple>]/<profile>/build/<pkg>/out`.
fn nested_target_dir(out_dir: &Path) -> PathBuf {
    let build = out_dir
        .ancestors()
        .find(|a| a.file_name().is_some_and(|n| n == "build"))
        .and_then(Path::parent)
        .and_then(Path::parent);
    match build {
        Some(t) => t.join("accprof-embed"),
        None => out_dir.join("accprof-embed"),
    }
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
}

/// A 64-bit FNV-1a hash: names the cache directory of this build's library.
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}
