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

use crate::source::Lang;

/// Lookup key of a name in `lang`: Fortran names are case-insensitive.
pub fn key(lang: Lang, name: &str) -> String {
    match lang {
        Lang::Fortran => name.to_ascii_lowercase(),
        Lang::C => name.to_string(),
    }
}
