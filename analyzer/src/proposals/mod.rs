//! Source changes the findings propose, planned from the source alone: a
//! `data` region around a host loop ([`data_region`]) and the rewrite of a
//! loop nest as an explicit `parallel loop` ([`parallel_loop`]). Rules
//! decide when to propose them; these modules decide what the change is,
//! with the reason for every choice, and never look at the trace.

pub mod caller_region;
pub mod data_region;
pub mod parallel_loop;
pub mod queue;
pub mod update_guard;

pub use crate::model::key;
