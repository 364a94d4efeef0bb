//! The traces recorded on GPU machines (cli/tests/fixtures/GPU) with
//! copies of their binaries (GPU/bin), and the repository's samples they
//! ran. A fixture is read with its binaries from bin/ only, never from the
//! paths recorded on the GPU machine, so it reads the same on every machine.

use std::path::{Path, PathBuf};

use crate::{LoadOptions, Run};

/// The repository's root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The repository's samples/, which the fixtures' programs were built from.
pub fn samples() -> PathBuf {
    repo().join("samples")
}

/// The fixtures recorded on `gpu` ("h200", "h100").
pub fn dir(gpu: &str) -> PathBuf {
    repo().join("cli/tests/fixtures").join(gpu)
}

/// Binaries from the fixture's bin/ only.
pub fn load_options(gpu: &str) -> LoadOptions {
    LoadOptions::only_in(vec![dir(gpu).join("bin")])
}

/// The trace `name` recorded on `gpu`, loaded with [`load_options`].
pub fn load(gpu: &str, name: &str) -> Run {
    let path = dir(gpu).join(format!("{name}.trace"));
    crate::load_run_with(&path, &load_options(gpu)).unwrap_or_else(|e| panic!("{e}"))
}
