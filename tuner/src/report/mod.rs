//! The tuner's results rendered as bytes for the command line to write:
//! a sweep as text, CSV, JSON and SVG plots ([`tune`]), a verify as text
//! ([`verify`]). Reports (accprof-reports) serializes the analyzer's model
//! and does not know the tuner's results, so they are rendered here, with
//! the analyzer's units, `accprof diff`'s rows (verify) and the reports'
//! plot font (the sweep's plots).

pub mod tune;
pub mod verify;
