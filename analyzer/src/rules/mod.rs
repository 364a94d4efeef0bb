//! The findings rules. Each rule is a module with one pure function,
//! `check(&Context) -> Checked`: the run (and the sources read for it) in,
//! findings and notes out. Beside the rules: `registry` (which rules run,
//! in what order), `context` ([`Context`]: what a rule is given, its
//! thresholds ([`Options`]) and what it returns ([`Checked`]), and what
//! several rules derive from the run, such as the large transfers in time
//! order, the history of each host buffer, when kernels ran and the names
//! of host buffers) and `builders` (the locations, labels, evidence and
//! findings the rules build from those facts). Each rule imports what it
//! uses from the file that defines it, the model's large transfers
//! ([`Xfer`]) and naming of host buffers included; this module hands on
//! what the rest of the analyzer calls.

pub mod a1_repeated_alloc;
pub mod a2_unused_alloc;
pub mod c1_stale_read;
pub mod c2_lost_write;
pub mod c3_unread_download;
pub(crate) mod coherence;
pub mod d1_duplicate_upload;
pub mod d2_duplicate_download;
pub mod d3_copy_not_needed;
pub mod d4_round_trip;
pub mod d5_upload_up_to_date;
pub mod d6_repeated_in_loop;
pub mod host_cost;
pub mod l1_vector_multiple;
pub mod l2_vector_trip;
pub mod l3_single_gang;
pub mod l4_launch_differs;
pub mod l5_launch_bound;
pub mod p1_partial_change;
pub(crate) mod queueing;
pub mod r1_runtime_bound;
pub mod r2_startup;
pub mod s1_pageable;
pub mod s2_sync_waits;
pub mod s3_idle_gaps;
pub mod s4_queue_order;
pub mod u1_unused_upload;

mod builders;
mod context;
mod registry;

pub use context::{Checked, Context, LaunchSite, Options};
// The large transfers and the buffers' names are the model's; the rules
// name them from here.
pub use crate::model::{Dir, Xfer};
pub use registry::run_all;
