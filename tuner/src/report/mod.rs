//! The tuner's results as text, CSV, JSON and plots, rendered through the
//! reports crate's tables, units and plot style (reports does not know the
//! tuner: it serializes the analyzer's model, the tuner owns its results).

pub mod tune;
pub mod verify;
