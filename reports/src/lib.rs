//! accprof-reports: pure serializers from the analyzer's model to bytes: the
//! PGI_ACC_TIME-style text summary, CSV, JSON, plots and Chrome trace JSON,
//! and the tuner's results (the before/after table of a verified patch).
//!
//! Every exporter takes a model and options and returns bytes; only the CLI
//! opens files.

pub mod diff;
pub mod export;
pub mod findings;
pub mod ledger;
pub mod plot;
pub mod table;
pub mod text;
pub mod timeline;
