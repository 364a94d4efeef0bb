//! The joined model of one process's run: OpenACC constructs with their
//! source sites, and the kernels and copies the device did for each.
//!
//! One concern a file: the entities and their handles (entities.rs), the
//! packed tables that hold them (tables.rs), the run's totals and
//! placement (facts.rs), the indices from a construct
//! to what it caused and from a construct to its line (index.rs), the
//! names of the buffers the transfers moved (variables.rs), the naming
//! policy that infers names from the sources (names.rs) around the large
//! transfers in time order (xfers.rs), each event's track and the runs' one
//! clock (tracks.rs), the read API every view asks (run.rs), what a run asks
//! of its sources (sources.rs), the summary's rows and the run's facts
//! (summary_types.rs) and the ledger's figures (ledger_types.rs,
//! ledger_rows.rs), which the run carries but the summary's and the
//! ledger's sinks make, and a run put together from its finished parts
//! (assemble.rs). The model knows neither
//! the join nor the rules: the builder (builder/) reads a trace through the
//! join and hands the model its parts, and the rules read the model.

mod assemble;
mod entities;
mod facts;
mod index;
pub(crate) mod ledger_rows;
pub(crate) mod ledger_types;
pub(crate) mod names;
mod process;
mod run;
mod sources;
pub(crate) mod summary_types;
mod tables;
mod tracks;
mod variables;
mod xfers;

pub(crate) use assemble::Parts;
pub use entities::*;
pub use facts::{Placement, Totals, ACC_DEVICE_HOST};
pub(crate) use index::{LineSites, SourceNames};
pub use names::key;
pub use process::Process;
pub use run::{Entities, Rows, Run};
pub(crate) use tables::Tables;
pub use tables::{AllocRow, ConstructRow, KernelRow, TransferRow};
pub use tracks::{CopyDirection, Item, Track};
pub use variables::NameOrigin;
pub(crate) use xfers::{group_by, large_xfers};
pub use xfers::{Dir, Xfer, LARGE_XFER_BYTES};

#[cfg(test)]
mod tests;
