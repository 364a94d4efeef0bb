//! The binary layout of a trace file, version 1.6.
//!
//! All fixed-width integers are little endian. "varint" is unsigned LEB128
//! (at most 10 bytes); "zigzag" is a varint of `(v << 1) ^ (v >> 63)`;
//! "str" and "bytes" are a varint length then that many bytes (str is UTF-8).
//!
//! # File
//!
//! ```text
//! magic     8 bytes  b"ACCPROF\0"
//! major     u16      FORMAT_MAJOR (1)
//! minor     u16      FORMAT_MINOR (6)
//! header    one block with magic HEADER_BLOCK_MAGIC (b"ACHD"), record count 1
//! data      zero or more blocks with magic DATA_BLOCK_MAGIC (b"ACBK")
//! ```
//!
//! A reader refuses a major it does not know. It reads any minor of its
//! major: later minors may add record kinds (skipped by older readers),
//! append fields at the end of a record body or of the header (ignored by
//! older readers), but do not change the meaning of existing fields or add
//! values to existing enum codes.
//!
//! # Block
//!
//! ```text
//! magic     u32      b"ACHD" (header) or b"ACBK" (data)
//! length    u32      payload length in bytes, <= MAX_BLOCK_PAYLOAD (16 MiB)
//! count     u32      number of records in the payload
//! crc       u32      CRC-32 (IEEE, as crc32fast computes it) of the payload
//! payload   length bytes
//! ```
//!
//! Writers seal a data block once its payload passes [`BLOCK_TARGET`]
//! (64 KiB), so a block is at most 64 KiB plus one record. A reader checks
//! magic, length, checksum and that the payload is exactly `count` framed
//! records before it returns any record of the block; a block that fails is
//! reported as lost, with everything after it (see [`crate::Reader`]).
//!
//! # Records (inside a data block payload)
//!
//! ```text
//! tag       u8       record kind, see the TAG_* constants; unknown tags are skipped
//! length    varint   body length
//! body      length bytes; readers ignore bytes after the fields they know
//! ```
//!
//! Each block starts a fresh delta state, so any block decodes alone:
//!
//! | state       | starts at | used by (as a zigzag delta from the previous value) |
//! |-------------|-----------|------------------------------------------------------|
//! | time        | 0         | Acc, Kernel, Memcpy, Memset start; DriverCall, Hash, Diagnostic |
//! | region      | 0         | Acc, DriverCall, Hash                                 |
//! | correlation | 0         | Kernel, Memcpy, Memset, DriverCall, Hash (32-bit wrapping delta) |
//! | host ptr    | 0         | Acc data host_ptr, DriverCall host_ptr, Hash host_ptr |
//! | device ptr  | 0         | Acc data device_ptr                                    |
//! | thread      | 0         | Acc, DriverCall: a flag says "same thread as last", else a varint |
//!
//! Deltas are 64-bit wrapping (32-bit for correlation ids), so every value
//! round-trips. Only the kinds of version 1.0 read or update this state;
//! kinds added by later minors must not update it (old readers skip them).
//!
//! Bodies, field by field (`?` marks a field present only when its flag is
//! set):
//!
//! ```text
//! 1  String      id varint, text str
//! 2  Module      id varint, path str, build_id bytes, base varint,
//!                text_start varint, text_end varint
//! 3  CallSite    id varint, module varint, return_offset varint
//! 4  Device      id varint, name str, sm_count varint, cc_major varint,
//!                cc_minor varint, global_memory_bytes varint
//! 5  Acc         kind u8 (acc_event_t number), flags varint,
//!                time zigzag, thread? varint, region zigzag,
//!                device_type? varint, device_number? varint,
//!                async_queue? zigzag, construct? u8 (acc_construct_t),
//!                call_site? varint,
//!                [if LOCATION: loc_flags u8, file? varint, function? varint,
//!                 line? varint, end_line? varint, function_line? varint,
//!                 function_end_line? varint],
//!                [if detail = data: var_name? varint, bytes? varint,
//!                 host_ptr? zigzag, device_ptr? zigzag]
//!                [if detail = launch: kernel_name? varint, num_gangs? varint,
//!                 num_workers? varint, vector_length? varint]
//!      flags: bit 0 same thread, 1 device_type, 2 device_number,
//!             3 async_queue, 4 construct, 5 implicit, 6 call_site,
//!             7 LOCATION, 8-9 detail (0 none, 1 data, 2 launch),
//!             10-13 the four detail fields in the order above.
//!      loc_flags: bits 0-5 the six location fields in the order above.
//! 6  Kernel      start zigzag, duration varint (end - start, wrapping),
//!                name varint, grid 3 x varint, block 3 x varint,
//!                registers, static_shared, dynamic_shared,
//!                local_per_thread, device, context, stream (varints),
//!                correlation zigzag
//! 7  Memcpy      start zigzag, duration varint, bytes varint,
//!                kinds u8 (copy_kind * 36 + src * 6 + dst),
//!                device, context, stream (varints), correlation zigzag
//! 8  Memset      start zigzag, duration varint, bytes varint, value varint,
//!                memory u8, device, context, stream (varints),
//!                correlation zigzag
//! 9  DriverCall  flags u8 (bits 0-2 api, 3 same thread, 4 host_ptr,
//!                5 bytes), time zigzag, thread? varint, region zigzag,
//!                correlation zigzag, host_ptr? zigzag, bytes? varint
//! 10 Hash        flags u8 (bit 0 download, bits 1-2 hash mode),
//!                time zigzag, region zigzag, correlation zigzag,
//!                host_ptr zigzag, bytes varint, hash u64,
//!                [1.2: hash_ns varint: 0 not measured, else 1 + the
//!                collector's time hashing in ns]
//! 11 Dropped     source u8, count varint
//! 12 Diagnostic  time zigzag, level u8, message str
//! 13 End         (1.1) time varint (absolute), how u8 (0 exit, 1 _exit,
//!                2 signal, 3 exec, 4 runtime error, 5 exit with unknown
//!                status), value zigzag (status, signal number or error
//!                code; 0 for exec and 5)
//! 14 Api         (1.1) flags u8 (bit 0 end (else start), 1 call_site,
//!                2 host_ptr, 3 bytes, 4 async_queue), time varint,
//!                thread varint, region varint, routine varint (string id),
//!                call_site? varint, host_ptr? varint, bytes? varint,
//!                async_queue? zigzag; all absolute (no delta state)
//! 15 CallChain   (1.2) site varint (a CallSite id), count varint
//!                (<= MAX_CALLERS), count x (module varint,
//!                return_offset varint): the callers above the site,
//!                innermost first
//! 16 MpiCall     (1.2) flags u8 (bit 0 cuda_aware known, 1 cuda_aware),
//!                start varint, duration varint, thread varint,
//!                routine varint (string id), count varint
//!                (<= MAX_MPI_RANGES), count x (host_ptr varint,
//!                bytes varint, write u8 0/1); all absolute;
//!                [1.6: call_site varint: 0 none, else 1 + the CallSite
//!                id of the program's call into MPI]
//! 17 DriverSpan  (1.4) flags u8 (bits 0-3 op, bit 4 same thread,
//!                5 cbid, 6 correlation), start zigzag (the time delta),
//!                duration varint, thread? varint, cbid? varint,
//!                correlation? zigzag; cbid and correlation are written
//!                only when nonzero (0: absent). The collector keeps the
//!                cbid of `Other` calls only (the op names the rest) and
//!                the correlation of launches, copies and memsets only
//!                (the calls whose kernel, memcpy or memset record shares
//!                it), so a span of a storm is mostly 7 bytes framed
//! 18 Coherence   (1.5) flags u8 (bits 0-1 kind, 2 confirmed, 3 variable),
//!                time varint, thread varint, code_addr varint,
//!                host_addr varint, range_start varint, range_bytes
//!                varint, variable? varint (string id), construct varint
//!                (a region id); all absolute (no delta state);
//!                [1.6: count varint (<= MAX_ACCESS_FRAMES), count x
//!                (module varint, return_offset varint): the return
//!                addresses above the faulting instruction, innermost
//!                first]
//! 19 Crash       (1.6) flags u8 (bit 0 address, bit 1 driver call),
//!                time varint, thread varint, signal zigzag, si_code
//!                zigzag, address? varint, driver call? (name bytes,
//!                correlation varint); all absolute: the fatal signal,
//!                written just before the End record
//! 20 OwnWork     (1.6) thread varint, start varint, duration varint; all
//!                absolute
//! 21 CheckSummary (1.6) flags u8 (bit 0 applied), time varint,
//!                ranges varint, bytes varint, faults varint,
//!                handler_ns varint, work_ns varint; all absolute
//! ```
//!
//! Reserved flag bits must be zero; a record that breaks that, has an
//! unknown enum code or ends inside a field is malformed. Enum codes:
//! CopyKind, MemoryKind, DriverApi, DriverOp, DropSource, Level, HashMode and
//! CoherenceKind are
//! numbered in declaration order from 0; AccEventKind and ConstructKind use
//! the OpenACC numbers.
//!
//! # Header (payload of the header block)
//!
//! ```text
//! host str, pid varint, rank_present u8, rank? varint,
//! command_line: count varint then count x str, executable str,
//! start_unix_ns varint, start_clock_ns varint,
//! clock u8 (0 = monotonic, n = Clock::Other(n)),
//! runtime str, collector str,
//! acc_prof source, cupti source (each: u8 0 = active, 1 = inactive + reason str),
//! hashing u8 (HashMode code),
//! (1.3) major u16, minor u16: the file's version again,
//! (1.4) process_start_present u8, process_start? varint: when the process
//!       started, on the trace clock (absent: a 1.3 header ends before it)
//! (1.6) checks u8: bit 0 the coherence check was asked for (absent: a 1.5
//!       header ends before it)
//! ```
//!
//! The copy of the version sits under the header block's checksum, which
//! the version field before it does not: a reader that finds the two
//! differ (or a minor of 1.3 or later without the copy, or another major
//! before a header that reads as its own) reports a damaged version field,
//! never a format it does not know.

/// Major version of the format this crate writes and reads. A reader
/// refuses any other major.
pub const FORMAT_MAJOR: u16 = 1;

/// Minor version of the format this crate writes. Readers accept any minor
/// of their major.
pub const FORMAT_MINOR: u16 = 6;

/// The first minor whose header holds a copy of the version.
pub const FIRST_MINOR_WITH_VERSION_COPY: u16 = 3;

/// The first 8 bytes of every trace file.
pub const FILE_MAGIC: [u8; 8] = *b"ACCPROF\0";

/// Magic of the header block.
pub const HEADER_BLOCK_MAGIC: u32 = u32::from_le_bytes(*b"ACHD");

/// Magic of a data block.
pub const DATA_BLOCK_MAGIC: u32 = u32::from_le_bytes(*b"ACBK");

/// Size of the fixed file prefix (magic, major, minor).
pub const FILE_PREFIX_LEN: usize = 12;

/// Size of a block header (magic, length, count, crc).
pub const BLOCK_HEADER_LEN: usize = 16;

/// A writer seals a block once its payload reaches this many bytes.
pub const BLOCK_TARGET: usize = 64 * 1024;

/// Largest payload a reader accepts (and a writer produces).
pub const MAX_BLOCK_PAYLOAD: usize = 16 * 1024 * 1024;

// Record kind tags. 0 is never written.
pub(crate) const TAG_STRING: u8 = 1;
pub(crate) const TAG_MODULE: u8 = 2;
pub(crate) const TAG_CALL_SITE: u8 = 3;
pub(crate) const TAG_DEVICE: u8 = 4;
pub(crate) const TAG_ACC: u8 = 5;
pub(crate) const TAG_KERNEL: u8 = 6;
pub(crate) const TAG_MEMCPY: u8 = 7;
pub(crate) const TAG_MEMSET: u8 = 8;
pub(crate) const TAG_DRIVER_CALL: u8 = 9;
pub(crate) const TAG_HASH: u8 = 10;
pub(crate) const TAG_DROPPED: u8 = 11;
pub(crate) const TAG_DIAGNOSTIC: u8 = 12;
pub(crate) const TAG_END: u8 = 13;
pub(crate) const TAG_API: u8 = 14;
pub(crate) const TAG_CALL_CHAIN: u8 = 15;
pub(crate) const TAG_MPI_CALL: u8 = 16;
pub(crate) const TAG_DRIVER_SPAN: u8 = 17;
pub(crate) const TAG_COHERENCE: u8 = 18;
pub(crate) const TAG_CRASH: u8 = 19;
pub(crate) const TAG_OWN_WORK: u8 = 20;
pub(crate) const TAG_CHECK_SUMMARY: u8 = 21;
