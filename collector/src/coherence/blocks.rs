//! The device blocks that outlive the construct that made them, and what
//! one host <-> device copy means for the table of mapped ranges.
//!
//! The driver reports every device allocation (`cuMemAlloc`, and the
//! globals of the code the runtime loads: `declare` variables, Fortran
//! module arrays) and every copy; the OpenACC runtime, GCC's libgomp
//! among them, need not say which host range a block holds (`create`
//! makes no copy at all). A block the runtime made for a data construct,
//! an `enter data`, a `declare` or an API routine (`acc_create`,
//! `acc_copyin`, `acc_malloc`) is still allocated when that construct
//! ends; a compute construct's own temporaries are freed before its end.
//! A block made inside a compute construct is pending until the construct
//! ends, kept if it is still allocated then. A later copy, made by any
//! construct (`update` included) or routine, whose device address falls
//! inside a kept block maps the host range it copied to that device
//! offset: its host address is the array's (or, for an upload of a data
//! construct's entry, possibly the runtime's staging buffer: see
//! `staging`). Plain data and pure functions: testable with the event
//! sequences the driver sends.

use std::collections::BTreeMap;

use accprof_trace::ConstructKind;

/// One device block the driver allocated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Block {
    pub bytes: u64,
    /// Made inside this compute construct (its region), which has not
    /// ended yet: possibly one of its own temporaries.
    pub pending: Option<u64>,
}

/// The device blocks allocated while the check runs, by start address.
#[derive(Debug, Default, Clone)]
pub(crate) struct Blocks {
    blocks: BTreeMap<u64, Block>,
    /// Blocks that outlived the construct that made them, ever, and their
    /// bytes: with none, no array stayed on the device between constructs.
    pub kept_ever: u64,
    pub kept_bytes: u64,
    /// Kept blocks whose arrays the runtime has not been asked for yet
    /// (see `lookup`), start and size.
    unasked: Vec<(u64, u64)>,
}

/// Kept blocks waiting to be asked about, at most (beyond, only the
/// copies show what they hold).
const MAX_UNASKED: usize = 4096;

/// Whether a construct of this kind runs code on the device (its data
/// clauses' blocks are its own temporaries).
pub(crate) fn is_compute(kind: ConstructKind) -> bool {
    matches!(
        kind,
        ConstructKind::Parallel
            | ConstructKind::Kernels
            | ConstructKind::Loop
            | ConstructKind::Serial
    )
}

/// What a copy means for the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Copy {
    /// Nothing: a compute construct's temporary, or no device address.
    Temporary,
    /// The host range is mapped to the copy's device address. `proven`:
    /// the host address is the array's (an `update`, or a copy outside a
    /// data construct's entry); else it may be the runtime's staging
    /// buffer, watched only once its bytes are shown to be the device's.
    Maps { proven: bool },
}

impl Blocks {
    /// The driver allocated `at..at+bytes`; `compute`: the region of the
    /// compute construct open on the calling thread, if any (the one whose
    /// end event comes, not the data events nested in it).
    pub fn alloc(&mut self, at: u64, bytes: u64, compute: Option<u64>) {
        if compute.is_none() {
            self.kept_ever += 1;
            self.kept_bytes += bytes;
            self.kept(at, bytes);
        }
        self.blocks.insert(
            at,
            Block {
                bytes,
                pending: compute,
            },
        );
    }

    /// A global of the code the runtime loaded (`declare` variables,
    /// Fortran module arrays): kept for the whole run.
    pub fn global(&mut self, at: u64, bytes: u64) {
        if at == 0 || bytes == 0 {
            return;
        }
        if self
            .blocks
            .insert(
                at,
                Block {
                    bytes,
                    pending: None,
                },
            )
            .is_none()
        {
            self.kept_ever += 1;
            self.kept_bytes += bytes;
            self.kept(at, bytes);
        }
    }

    /// The block `at..at+bytes` is kept: its arrays are to be asked for.
    fn kept(&mut self, at: u64, bytes: u64) {
        if self.unasked.len() < MAX_UNASKED {
            self.unasked.push((at, bytes));
        }
    }

    /// The kept blocks not asked about yet (each is handed out once).
    pub fn take_unasked(&mut self) -> Vec<(u64, u64)> {
        std::mem::take(&mut self.unasked)
    }

    /// The arrays of the block at `at` are known without asking the
    /// runtime: a `data` construct's entry made it, and its clauses name
    /// them (see `data_start`).
    pub fn named_by_clauses(&mut self, at: u64) {
        self.unasked.retain(|u| u.0 != at);
    }

    /// The compute construct `region` ended: the blocks it made that are
    /// still allocated outlive it.
    pub fn construct_end(&mut self, region: u64) {
        for (&at, b) in self.blocks.iter_mut() {
            if b.pending == Some(region) {
                b.pending = None;
                self.kept_ever += 1;
                self.kept_bytes += b.bytes;
                if self.unasked.len() < MAX_UNASKED {
                    self.unasked.push((at, b.bytes));
                }
            }
        }
    }

    /// The driver frees the block at `at`: the device span it held
    /// (`at..at+1` when the block was not seen allocated).
    pub fn free(&mut self, at: u64) -> (u64, u64) {
        let bytes = self.blocks.remove(&at).map_or(1, |b| b.bytes);
        self.unasked.retain(|u| u.0 != at);
        (at, at.saturating_add(bytes))
    }

    /// The kept block holding the device address `device`, if any: start
    /// and size.
    pub fn kept_at(&self, device: u64) -> Option<(u64, u64)> {
        let (&at, b) = self.blocks.range(..=device).next_back()?;
        (device < at.saturating_add(b.bytes) && b.pending.is_none()).then_some((at, b.bytes))
    }

    /// What a copy to or from `device` means, made while `open` (the
    /// innermost construct on the calling thread) is open.
    pub fn copy(&self, device: u64, open: Option<ConstructKind>) -> Copy {
        if device == 0 {
            return Copy::Temporary;
        }
        match open {
            // An update copies only data present on the device, directly
            // between the array and its device copy.
            Some(ConstructKind::Update) => Copy::Maps { proven: true },
            // A data construct's entry: its blocks outlive it (uploads of
            // small arrays may come from a staging buffer).
            Some(ConstructKind::Data | ConstructKind::EnterData) => Copy::Maps { proven: false },
            // Into a block that outlived its construct: from a compute
            // construct (present data), an exit, or an API routine
            // (acc_copyin, acc_update_device) outside any construct.
            _ if self.kept_at(device).is_some() => Copy::Maps { proven: false },
            _ => Copy::Temporary,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ConstructKind::*;

    const MAPS: Copy = Copy::Maps { proven: false };

    /// `#pragma acc data create(u)` in main, `update device(u)`, compute
    /// under `data present(u)`, as NPB SP does: the block made by the data
    /// construct (no copy: `create`) is found by the update's copy and by
    /// a copy of the exit; the compute construct's own temporary is not.
    #[test]
    fn create_then_update_maps_the_updates_host_range() {
        let mut b = Blocks::default();
        b.alloc(0x7000_0000, 1 << 20, None);
        assert_eq!(b.kept_ever, 1);
        // A compute construct with its own copyin of a scalar array.
        b.alloc(0x7100_0000, 64, Some(2));
        assert_eq!(b.copy(0x7100_0000, Some(Parallel)), Copy::Temporary);
        assert_eq!(b.free(0x7100_0000), (0x7100_0000, 0x7100_0040));
        b.construct_end(2);
        assert_eq!(
            b.kept_ever, 1,
            "a temporary freed inside its construct is not kept"
        );
        // update device(u) / update self(u[10:20]).
        assert_eq!(
            b.copy(0x7000_0000, Some(Update)),
            Copy::Maps { proven: true }
        );
        assert_eq!(
            b.copy(0x7000_0000 + 80, Some(Update)),
            Copy::Maps { proven: true }
        );
        // The data construct's exit (construct kind Data) copies out.
        assert_eq!(b.copy(0x7000_0000, Some(Data)), MAPS);
        assert_eq!(b.free(0x7000_0000), (0x7000_0000, 0x7010_0000));
        assert_eq!(b.kept_at(0x7000_0000), None);
    }

    /// A `data` construct's block, whose clauses name its arrays, is kept
    /// but not asked about; an `enter data` block beside it is.
    #[test]
    fn a_data_constructs_block_is_not_asked_about() {
        let mut b = Blocks::default();
        b.alloc(0x7000_0000, 1 << 20, None);
        b.named_by_clauses(0x7000_0000);
        b.alloc(0x7200_0000, 4096, None);
        assert_eq!(b.take_unasked(), vec![(0x7200_0000, 4096)]);
        assert_eq!(b.kept_at(0x7000_0000), Some((0x7000_0000, 1 << 20)));
        assert_eq!(b.kept_ever, 2);
    }

    /// `acc_create` / `acc_malloc` outside any construct, then a copy of
    /// `acc_update_device` or `acc_copyin` (no construct either): mapped.
    #[test]
    fn api_routines_outside_constructs_keep_their_blocks() {
        let mut b = Blocks::default();
        b.alloc(0x10_0000, 4096, None);
        assert_eq!(b.kept_at(0x10_0000 + 4095), Some((0x10_0000, 4096)));
        assert_eq!(b.kept_at(0x10_0000 + 4096), None);
        assert_eq!(b.copy(0x10_0000 + 8, None), MAPS);
        // A copy to a block nobody reported allocated: not a mapping.
        assert_eq!(b.copy(0x90_0000, None), Copy::Temporary);
        assert_eq!(b.copy(0, Some(Update)), Copy::Temporary);
    }

    /// `declare create` globals and Fortran module arrays live in the
    /// loaded code's globals: kept from the start, found by later copies.
    #[test]
    fn globals_of_the_loaded_code_are_kept() {
        let mut b = Blocks::default();
        b.global(0x5000, 800);
        b.global(0x5000, 800);
        assert_eq!((b.kept_ever, b.kept_bytes), (1, 800));
        assert_eq!(b.copy(0x5000 + 400, Some(Parallel)), MAPS);
        b.global(0, 8);
        assert_eq!(b.kept_at(0), None);
        assert_eq!((b.kept_ever, b.kept_bytes), (1, 800));
    }

    /// A block made inside a compute construct that is still allocated
    /// when the construct ends (`present_or_create` that stayed, an
    /// `enter data` in a routine called from it) outlives it.
    #[test]
    fn a_compute_constructs_block_alive_at_its_end_is_kept() {
        let mut b = Blocks::default();
        b.alloc(0x8000, 256, Some(7));
        assert_eq!(b.kept_at(0x8000), None);
        b.construct_end(6);
        assert_eq!(b.kept_at(0x8000), None, "another construct's end");
        b.construct_end(7);
        assert_eq!(b.kept_at(0x8000), Some((0x8000, 256)));
        assert_eq!((b.kept_ever, b.kept_bytes), (1, 256));
        assert_eq!(b.copy(0x8010, Some(Parallel)), MAPS);
    }
}
