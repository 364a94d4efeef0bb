//! Decoding blocks on worker threads: [`ParallelReader`].

use std::io::Read;
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::sync::{Arc, Mutex};

use crate::codec::DeltaState;
use crate::reader::{next_in_block_into, Loss, Reader, RecordSource};
use crate::record::{DropSource, Header, Record};

/// Jobs (and results) queued for each decoding worker, at most. With one
/// job being decoded by each worker and one result being read, memory
/// holds at most `workers * (2 * QUEUE + 1) + 1` blocks, each 64 KiB of
/// payload and about 5,000 decoded records, whatever the trace's size.
const QUEUE: usize = 2;

/// What a slot of a record buffer holds when it holds no record: cheap to
/// make and to drop.
const SPARE: Record = Record::Dropped {
    source: DropSource::Collector,
    count: 0,
};

/// Most decoding workers, whatever the machine.
const MAX_WORKERS: usize = 4;

/// A block for a worker: its validated payload and what the sequential
/// reader found before it.
struct Job {
    payload: Vec<u8>,
    /// Input offset of the payload's first byte.
    offset: u64,
    /// Losses recorded since the previous job (damage skipped to get here).
    losses: Vec<Loss>,
    /// The input is done: this job is the last.
    last: bool,
}

/// A decoded block, for the consumer.
struct Decoded {
    /// The records are the first `len`; the rest are spare slots.
    records: Vec<Record>,
    len: usize,
    /// The job's losses, then those of records that could not be decoded.
    losses: Vec<Loss>,
    /// Records of unknown kinds in this block.
    skipped_unknown: u64,
    last: bool,
}

/// One decoding worker, as the consumer sees it.
struct WorkerEnds {
    results: Receiver<Decoded>,
    /// Emptied record buffers, back to the worker.
    empties: Sender<Vec<Record>>,
}

/// Reads a trace with the decoding of its blocks spread over worker
/// threads; the same records, losses and skipped counts as [`Reader`], in
/// the same order.
///
/// One thread reads the input with a sequential [`Reader`] (made with
/// [`Reader::parallel`], so resync and every other setting are the ones it
/// was given): it checks each block whole (magic, length, checksum,
/// framing), accounts for damaged ones and resynchronises exactly as the
/// sequential reader does, and hands each intact block, with the losses
/// found before it, to the decoding workers in turn (round robin). The
/// consumer takes the decoded blocks from the workers in the same turn, so
/// records come out in file order. With a single worker (two cores: the
/// other is the consumer's), that one thread reads and decodes, so that
/// two busy threads do not take turns on one core. Each queue is bounded (a few blocks), so
/// memory stays bounded whatever the trace's size; emptied buffers go back
/// to be filled again.
///
/// Blocks decode alone: each starts a fresh delta state, and a record that
/// cannot be decoded costs the rest of its block only, as in the sequential
/// reader. String tables need no special handling: a `String` (like a
/// `Module` or a `CallSite`) is an ordinary record of its block, handed out
/// in file order, so the consumer interns it before it sees any record that
/// uses it, exactly as with the sequential reader.
///
/// [`losses`](Self::losses) and [`skipped_unknown`](Self::skipped_unknown)
/// are complete once [`next_record`](Self::next_record) has returned `None`;
/// before that they may run a block ahead of the records handed out.
///
/// With no worker (on a single core), or where no thread can be started,
/// it reads on the calling thread.
pub struct ParallelReader {
    header: Header,
    version: (u16, u16),
    /// The block being handed out: records `next..len` are still to come.
    current: Vec<Record>,
    next: usize,
    len: usize,
    losses: Vec<Loss>,
    skipped_unknown: u64,
    feed: Feed,
    done: bool,
}

enum Feed {
    Workers {
        workers: Vec<WorkerEnds>,
        /// The worker whose result comes next.
        turn: usize,
    },
    /// No thread could be started.
    Inline(Box<dyn RecordSource + Send>),
}

impl<R: Read + Send + 'static> Reader<R> {
    /// Goes on reading with the decoding on worker threads (see
    /// [`ParallelReader`]): one worker per core but the one the consumer
    /// needs, up to four. On a single core it reads on the calling thread,
    /// where handing records between threads would only cost.
    pub fn parallel(self) -> ParallelReader {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        self.parallel_with((cores - 1).min(MAX_WORKERS))
    }

    /// [`parallel`](Self::parallel) with `workers` decoding threads; with
    /// none, it reads on the calling thread.
    pub fn parallel_with(self, workers: usize) -> ParallelReader {
        let header = self.header().clone();
        let version = self.version();
        let mut reader = ParallelReader {
            header,
            version,
            current: Vec::new(),
            next: 0,
            len: 0,
            losses: Vec::new(),
            skipped_unknown: 0,
            feed: Feed::Workers {
                workers: Vec::new(),
                turn: 0,
            },
            done: false,
        };
        if workers == 1 {
            return self.read_and_decode_on_one(reader);
        }
        let (payload_back, payloads) = mpsc::channel::<Vec<u8>>();
        let mut ends = Vec::new();
        let mut job_txs = Vec::new();
        for i in 0..workers {
            let (job_tx, job_rx) = mpsc::sync_channel::<Job>(QUEUE);
            let (res_tx, res_rx) = mpsc::sync_channel::<Decoded>(QUEUE);
            let (empty_tx, empty_rx) = mpsc::channel::<Vec<Record>>();
            let back = payload_back.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("accprof-decode-{i}"))
                .spawn(move || decode_blocks(job_rx, res_tx, empty_rx, back));
            if spawned.is_err() {
                break;
            }
            job_txs.push(job_tx);
            ends.push(WorkerEnds {
                results: res_rx,
                empties: empty_tx,
            });
        }
        drop(payload_back);
        if ends.is_empty() {
            reader.feed = Feed::Inline(Box::new(self));
            return reader;
        }
        if let Err(r) = spawn_with("accprof-read", self, move |r| {
            read_blocks(r, job_txs, payloads)
        }) {
            reader.feed = Feed::Inline(r);
            return reader;
        }
        reader.feed = Feed::Workers {
            workers: ends,
            turn: 0,
        };
        reader
    }
}

/// Runs `work` on `reader` in a new thread named `name`. Spawning moves
/// the reader into the closure, so it waits in a slot the thread empties:
/// when no thread starts, it comes back as the error.
fn spawn_with<R: Read + Send + 'static>(
    name: &str,
    reader: Reader<R>,
    work: impl FnOnce(Reader<R>) + Send + 'static,
) -> Result<(), Box<Reader<R>>> {
    let slot = Arc::new(Mutex::new(Some(reader)));
    let io_slot = Arc::clone(&slot);
    let spawned = std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            let taken = io_slot.lock().ok().and_then(|mut s| s.take());
            if let Some(r) = taken {
                work(r);
            }
        });
    if spawned.is_err() {
        if let Some(r) = slot.lock().ok().and_then(|mut s| s.take()) {
            return Err(Box::new(r));
        }
    }
    Ok(())
}

impl<R: Read + Send + 'static> Reader<R> {
    /// [`parallel_with`](Self::parallel_with) one worker: a single thread
    /// both reads and decodes.
    fn read_and_decode_on_one(self, mut reader: ParallelReader) -> ParallelReader {
        let (res_tx, res_rx) = mpsc::sync_channel::<Decoded>(QUEUE);
        let (empty_tx, empty_rx) = mpsc::channel::<Vec<Record>>();
        if let Err(r) = spawn_with("accprof-decode-0", self, move |r| {
            read_and_decode(r, res_tx, empty_rx)
        }) {
            reader.feed = Feed::Inline(r);
            return reader;
        }
        reader.feed = Feed::Workers {
            workers: vec![WorkerEnds {
                results: res_rx,
                empties: empty_tx,
            }],
            turn: 0,
        };
        reader
    }
}

/// The I/O thread: loads and checks blocks with the sequential reader and
/// deals them to the workers in turn, until the input ends or the consumer
/// is gone.
fn read_blocks<R: Read>(
    mut reader: Reader<R>,
    workers: Vec<SyncSender<Job>>,
    payloads: Receiver<Vec<u8>>,
) {
    let mut losses_sent = 0;
    let mut turn = 0;
    loop {
        reader.load_block();
        let spare = payloads.try_recv().unwrap_or_default();
        let (payload, offset) = reader.take_block(spare);
        let last = reader.is_done();
        if payload.is_empty() && !last {
            // A damaged block skipped (its loss stays open until the next
            // intact block), or an empty one.
            continue;
        }
        let all = reader.losses();
        let losses = all[losses_sent..].to_vec();
        losses_sent = all.len();
        let job = Job {
            payload,
            offset,
            losses,
            last,
        };
        if workers[turn].send(job).is_err() || last {
            return;
        }
        turn = (turn + 1) % workers.len();
    }
}

/// Decodes a job's block into `records`, overwriting the records of an
/// earlier block in place; gives back the payload, to be filled again.
fn decode_job(job: Job, records: Vec<Record>) -> (Decoded, Vec<u8>) {
    let empty = Decoded {
        records,
        len: 0,
        losses: Vec::new(),
        skipped_unknown: 0,
        last: false,
    };
    decode_onto(job, empty)
}

/// Decodes a job's block after the records `into` holds already (its
/// losses and skipped counts go on too).
fn decode_onto(job: Job, into: Decoded) -> (Decoded, Vec<u8>) {
    let Decoded {
        mut records,
        mut len,
        mut losses,
        mut skipped_unknown,
        ..
    } = into;
    losses.extend(job.losses);
    let mut pos = 0;
    let mut state = DeltaState::default();
    loop {
        if len == records.len() {
            records.push(SPARE);
        }
        if !next_in_block_into(
            &job.payload,
            &mut pos,
            &mut state,
            job.offset,
            &mut skipped_unknown,
            &mut losses,
            &mut records[len],
        ) {
            break;
        }
        len += 1;
    }
    let decoded = Decoded {
        records,
        len,
        losses,
        skipped_unknown,
        last: job.last,
    };
    (decoded, job.payload)
}

/// A decoding worker: decodes each job's block into records.
fn decode_blocks(
    jobs: Receiver<Job>,
    results: SyncSender<Decoded>,
    empties: Receiver<Vec<Record>>,
    payload_back: Sender<Vec<u8>>,
) {
    while let Ok(job) = jobs.recv() {
        let last = job.last;
        let (decoded, payload) = decode_job(job, empties.try_recv().unwrap_or_default());
        // The I/O thread may be gone (at the end): then the buffer is freed.
        let _ = payload_back.send(payload);
        if results.send(decoded).is_err() || last {
            return;
        }
    }
}

/// The one worker, when there is one: reads and checks the blocks as
/// [`read_blocks`] does and decodes each itself, so no block is handed
/// between threads before it is decoded (where the consumer takes one of
/// two cores, a third busy thread only takes turns with them).
fn read_and_decode<R: Read>(
    mut reader: Reader<R>,
    results: SyncSender<Decoded>,
    empties: Receiver<Vec<Record>>,
) {
    let mut losses_sent = 0;
    let mut spare = Vec::new();
    let mut pending: Option<Decoded> = None;
    loop {
        reader.load_block();
        let (payload, offset) = reader.take_block(std::mem::take(&mut spare));
        let last = reader.is_done();
        if payload.is_empty() && !last {
            // A damaged block skipped, or an empty one: as in `read_blocks`.
            spare = payload;
            continue;
        }
        let all = reader.losses();
        let losses = all[losses_sent..].to_vec();
        losses_sent = all.len();
        let job = Job {
            payload,
            offset,
            losses,
            last,
        };
        let (decoded, payload) = match pending.take() {
            Some(d) => decode_onto(job, d),
            None => decode_job(job, empties.try_recv().unwrap_or_default()),
        };
        spare = payload;
        // Several blocks go together, so that handing them over (and
        // waking the consumer) costs less per record.
        if decoded.len < BATCH && !decoded.last {
            pending = Some(decoded);
            continue;
        }
        if results.send(decoded).is_err() || last {
            return;
        }
    }
}

/// Records a single worker hands over at once, at least (unless the input
/// ends).
const BATCH: usize = 16 * 1024;

impl ParallelReader {
    /// The process header.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// Format version of the input (major, minor).
    pub fn version(&self) -> (u16, u16) {
        self.version
    }

    /// What was not read, and why. Complete once `next_record` has
    /// returned `None`.
    pub fn losses(&self) -> &[Loss] {
        match &self.feed {
            Feed::Inline(r) => r.losses(),
            Feed::Workers { .. } => &self.losses,
        }
    }

    /// Records of unknown kinds skipped. Complete once `next_record` has
    /// returned `None`.
    pub fn skipped_unknown(&self) -> u64 {
        match &self.feed {
            Feed::Inline(r) => r.skipped_unknown(),
            Feed::Workers { .. } => self.skipped_unknown,
        }
    }

    /// The next record, in file order; `None` where the sequential reader
    /// would stop.
    #[inline]
    pub fn next_record(&mut self) -> Option<Record> {
        if let Feed::Inline(r) = &mut self.feed {
            return r.next_record();
        }
        while self.next == self.len && !self.done {
            self.next_block();
        }
        let slot = self.current[..self.len].get_mut(self.next)?;
        self.next += 1;
        Some(std::mem::replace(slot, SPARE))
    }

    /// Calls `f` with each record still to come, in file order, up to
    /// where [`next_record`](Self::next_record) would return `None`. The
    /// records are lent where they were decoded, never copied: the way to
    /// read a large trace.
    #[inline]
    pub fn for_each_record(&mut self, mut f: impl FnMut(&Record)) {
        if let Feed::Inline(r) = &mut self.feed {
            while let Some(rec) = r.next_record() {
                f(&rec);
            }
            return;
        }
        loop {
            for rec in &self.current[self.next..self.len] {
                f(rec);
            }
            self.next = self.len;
            if self.done {
                return;
            }
            self.next_block();
        }
    }

    #[inline(never)]
    fn next_block(&mut self) {
        let Feed::Workers { workers, turn } = &mut self.feed else {
            // Read in `next_record`.
            return;
        };
        let empty = std::mem::take(&mut self.current);
        (self.next, self.len) = (0, 0);
        if empty.capacity() > 0 {
            // Back to the worker that filled it; it may be gone (at the end).
            let prev = (*turn + workers.len() - 1) % workers.len();
            let _ = workers[prev].empties.send(empty);
        }
        match workers[*turn].results.recv() {
            Ok(d) => {
                self.current = d.records;
                self.len = d.len;
                self.losses.extend(d.losses);
                self.skipped_unknown += d.skipped_unknown;
                self.done = d.last;
                *turn = (*turn + 1) % workers.len();
            }
            Err(_) => {
                // A thread ended without the last block: it panicked. Say so
                // rather than end quietly.
                self.losses.push(Loss {
                    offset: 0,
                    bytes: 0,
                    reason: "a reading thread failed; the rest of the input was not read".into(),
                });
                self.done = true;
            }
        }
    }
}

impl Iterator for ParallelReader {
    type Item = Record;

    fn next(&mut self) -> Option<Record> {
        self.next_record()
    }
}

impl RecordSource for ParallelReader {
    fn header(&self) -> &Header {
        ParallelReader::header(self)
    }
    fn version(&self) -> (u16, u16) {
        ParallelReader::version(self)
    }
    fn next_record(&mut self) -> Option<Record> {
        ParallelReader::next_record(self)
    }
    fn for_each_record<F: FnMut(&Record)>(&mut self, f: F) {
        ParallelReader::for_each_record(self, f)
    }
    fn losses(&self) -> &[Loss] {
        ParallelReader::losses(self)
    }
    fn skipped_unknown(&self) -> u64 {
        ParallelReader::skipped_unknown(self)
    }
}
