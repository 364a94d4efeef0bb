//! The test kit: the recorded fixtures ([`fixtures`]), hand-written traces
//! ([`trace`]), hand-built runs for the rules ([`runs`]), golden files
//! with a bless switch ([`golden`]) and readers of an analysis
//! ([`findings`]), for the tests of this crate and of the crates that test
//! with it (feature `testkit`, as a dev-dependency). Test
//! code only: it panics on failure. Every run it makes, by hand or from
//! records, is read through the join, as `accprof` reads a trace.

pub mod findings;
pub mod fixtures;
pub mod golden;
pub mod lines;
pub mod runs;
pub mod trace;
