//! accprof-tuner: programs built with the user's command and run under the
//! collector, through the [`Runner`] trait; what is decided from those
//! runs; and how it is shown.
//!
//! - [`runner`]: the [`Runner`] trait, real processes and a mock.
//! - [`verify()`]: a patch checked (original against patched: same
//!   output? how much faster?).
//! - [`tune::tune`]: a sweep of gang/worker/vector settings, or of whole
//!   directives, over one construct: which configurations to try
//!   ([`space`], the search), each one built, run and measured
//!   ([`measure`], [`stats`]), what is reused between runs
//!   ([`tune::cache`]) and the re-check of the winner; [`tune::prebuild`] builds the programs
//!   for a machine that cannot.
//! - [`report`]: both results as text, and a sweep's as CSV, JSON and SVG
//!   plots. Reports (accprof-reports) does not know the tuner's results,
//!   so they are rendered here, with the analyzer's units, `accprof diff`'s
//!   rows (verify) and the reports' plot font (a sweep's plots).
//! - Around them: the user's command templates ([`command`]), the launch
//!   under the collector shared with `accprof run` ([`launch`]), the
//!   source patched in place and restored even after a kill ([`backup`]).
//!
//! Programs are run through a trait so verify and the sweep are testable
//! without a GPU ([`MockRunner`]). The numbers come from the analyzer's
//! summary of each run's trace; this crate never recomputes them. Its
//! renderers return what they render: only the command line decides where
//! it is written.

pub mod backup;
pub mod command;
mod error;
mod key;
pub mod launch;
pub mod measure;
mod outcome;
mod prebuilt;
pub mod report;
pub mod runner;
pub mod space;
pub mod stats;
pub mod tune;
pub mod verify;

pub use runner::{BuildOutput, MockProgram, MockRunner, ProcessRunner, RunOutput, Runner};
pub use verify::{
    verify, DeviceTimes, Difference, Measured, NotMeasured, PatchedFile, PrebuiltFile, Verified,
    VerifyPlan, VerifyPrebuilt, PREBUILT_VERIFY,
};

pub use error::{first_error, stderr_tail, Error, Result, STDERR_TAIL};
pub use key::text_hash;
