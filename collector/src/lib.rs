//! accprof-collector: `libaccprof.so`, loaded into an OpenACC program with
//! `LD_PRELOAD` (or named in `ACC_PROFLIB`). It records the OpenACC
//! profiling interface's events, the application's calls of the OpenACC API
//! routines (which it interposes) and, when CUPTI loads, the kernels, copies
//! and memsets they cause, each tied to its construct and source call site,
//! into one trace file per process.
//!
//! It must never crash, hang, or change what the observed program prints or
//! returns: every `extern "C"` entry catches panics, internal errors disable
//! the collector with one line on stderr, exits and signals flush with a
//! bounded wait. It never symbolizes, aggregates or renders anything: that
//! is the analyzer's job, offline.

pub mod accprof;
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
mod api;
mod buffer;
mod callsite;
pub mod clock;
mod coherence;
pub mod config;
mod crash;
mod cupti;
mod ending;
mod event;
mod fasthash;
mod hash;
mod header;
// Not in this crate's own unit-test binary: it would interpose the test
// runner's exit.
#[cfg(not(test))]
mod interpose;
mod mpi;
mod next_fns;
mod note;
mod output;
mod region;
mod signals;
mod sink;
mod start;
pub mod state;
mod summary_at_exit;
mod tls;
mod writer;

/// For tests and tools: the version string written into trace headers.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
