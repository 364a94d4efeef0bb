//! The joined model of one process's run: OpenACC constructs with their
//! source sites, and the kernels and copies the device did for each.
//!
//! One concern a file: the entities and their handles (entities.rs), the
//! packed tables that hold them (tables.rs), the run's totals and
//! placement (facts.rs), the indices from a construct
//! to what it caused and from a construct to its line (index.rs), the
//! names of the buffers the transfers moved (variables.rs), each event's
//! track and the runs' one clock (tracks.rs), the read
//! API every view asks (run.rs), and a run put together from its finished
//! parts (assemble.rs). The model knows no join: the builder (builder/)
//! reads a trace through the join and hands the model its parts.

mod assemble;
mod entities;
mod facts;
mod index;
mod process;
mod run;
mod tables;
mod tracks;
mod variables;

pub(crate) use assemble::Parts;
pub use entities::*;
pub use facts::{Placement, Totals, ACC_DEVICE_HOST};
pub(crate) use index::LineSites;
pub use process::Process;
pub use run::{Entities, Rows, Run};
pub(crate) use tables::Tables;
pub use tables::{AllocRow, ConstructRow, KernelRow, TransferRow};
pub use tracks::{CopyDirection, Item, Track};
pub use variables::NameOrigin;

#[cfg(test)]
mod tests;
