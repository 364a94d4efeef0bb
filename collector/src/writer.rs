//! The one thread that does I/O.
//!
//! It wakes when a buffer fills, when a flush is requested, and a few times a
//! second regardless, drains every buffer and appends whole checksummed
//! blocks to the trace, so a crash loses at most the last fraction of a
//! second. The file is opened on the first drain that holds OpenACC or
//! device activity, so the header describes sources as they ended up, and a
//! process that never did any (a shell, a wrapper like `time`, a launcher
//! daemon, a forked child that execs at once) leaves no file behind and
//! touches none. Definitions drained before that are held until it opens.
//!
//! Each flush asked for with an ending (see `ending`) and the final one end
//! with an `End` record, so a complete trace says how its process ended.
//!
//! Waking uses an eventfd, so a signal handler can request a flush and wait
//! for it without taking a lock or allocating. The requests and the waits
//! (`flush_and_wait`, `stop`) are in `signals`, with everything else a
//! handler runs; this is the thread that serves them.

use std::fs::File;
use std::io::BufWriter;
use std::sync::atomic::Ordering;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use accprof_trace::{DropSource, Record, Writer};

use crate::event::Event;
pub use crate::signals::flush::{flush_and_wait, stop};
use crate::signals::flush::{
    mark_writer_thread, DEVICE_FLUSH, FINISHED, FLUSH_DONE, FLUSH_REQUESTED, FROM_SIGNAL, RUNNING,
    STOP, WRITTEN,
};
use crate::{ending, note, sink};

const TICK_MS: i32 = 100;

/// Path of the trace being written, once opened (read by the summary).
pub static TRACE_PATH: Mutex<Option<String>> = Mutex::new(None);

/// What the writer asks of the device side (CUPTI's buffered records),
/// registered once by whoever starts both: the writer does not name it.
pub(crate) struct DeviceSide {
    /// Waits up to the given time for the device side's start to finish
    /// (the header says whether it records).
    pub await_start: fn(Duration) -> bool,
    /// Hands over the records the device side still buffers.
    pub flush: fn(),
    /// The name of a driver call by its callback id (for a crash record).
    pub driver_call_name: fn(u32) -> String,
}

static DEVICE_SIDE: OnceLock<DeviceSide> = OnceLock::new();

/// Registers the device side; the first registration stays.
pub(crate) fn set_device_side(side: DeviceSide) {
    let _ = DEVICE_SIDE.set(side);
}

/// Starts the writer thread. Returns an error text if it cannot run.
pub fn start() -> Result<(), String> {
    // SAFETY: eventfd has no memory preconditions.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    if fd < 0 {
        return Err(format!(
            "eventfd failed: {}",
            std::io::Error::last_os_error()
        ));
    }
    let old = sink::set_wake_fd(fd);
    if old >= 0 {
        // SAFETY: closing the descriptor we created earlier (inherited by a
        // forked child; the parent keeps its own copy).
        unsafe { libc::close(old) };
    }
    STOP.store(false, Ordering::Release);
    FINISHED.store(false, Ordering::Release);
    RUNNING.store(true, Ordering::Release);
    std::thread::Builder::new()
        .name("accprof-writer".into())
        .spawn(run)
        .map(|_| ())
        .map_err(|e| {
            RUNNING.store(false, Ordering::Release);
            format!("cannot start the writer thread: {e}")
        })
}

/// Records written between two advances of the progress counter that
/// waits on the writer watch.
const PROGRESS_STEP: u64 = 1 << 14;

fn wait_for_wake() {
    let fd = sink::wake_fd();
    if fd < 0 {
        std::thread::sleep(Duration::from_millis(TICK_MS as u64));
        return;
    }
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd; then a non-blocking read of 8 bytes into a
    // local resets the eventfd counter: the raw system call, so the
    // library's own read never enters the `read` it exports (see
    // `signals`).
    unsafe {
        libc::poll(&mut pfd, 1, TICK_MS);
        let mut v: u64 = 0;
        libc::syscall(libc::SYS_read, fd, &mut v as *mut u64, 8);
    }
}

enum Sink {
    /// Not opened yet: nothing worth writing has arrived.
    Pending,
    Open(Writer<BufWriter<File>>),
    /// Opening or writing failed; said once, records are dropped.
    Failed,
}

/// True for what makes a process worth a trace: OpenACC events and device
/// activity, not definitions, diagnostics or drop counts alone.
fn is_activity(r: &Record) -> bool {
    matches!(
        r,
        Record::Acc(_)
            | Record::Kernel(_)
            | Record::Memcpy(_)
            | Record::Memset(_)
            | Record::DriverCall(_)
            | Record::Hash(_)
    )
}

fn run() {
    mark_writer_thread();
    crate::tls::mark_own_thread(crate::clock::thread_id());
    let mut sink = Sink::Pending;
    let mut batch = sink::Batch::default();
    let mut spares: Vec<Vec<Event>> = Vec::new();
    // Drained before the file was opened: written first when it is.
    let mut held: Vec<Record> = Vec::new();
    let mut dropped_written = 0u64;
    let mut clock = crate::clock::Calibration::new();
    loop {
        wait_for_wake();
        let stopping = STOP.load(Ordering::Acquire);
        let requested = FLUSH_REQUESTED.load(Ordering::Acquire);
        let from_signal = FROM_SIGNAL.swap(false, Ordering::AcqRel);
        let device = DEVICE_FLUSH.swap(false, Ordering::AcqRel);
        if (stopping || from_signal || device) && !crate::crash::faulted() {
            // The device side first, so its buffered records are in
            // (never after a fault: see `crash::faulted`).
            if let Some(side) = DEVICE_SIDE.get() {
                (side.flush)();
            }
        }
        if from_signal {
            sink::drain_nonblocking(&mut batch);
        } else {
            sink::drain(&mut batch, &mut spares);
        }
        // Stamps of host events into ns (see clock): the reading comes
        // after the drain, so it is newer than every stamp drained.
        if crate::clock::uses_tsc() {
            clock.take_reading();
            for e in batch.threads.iter_mut().flat_map(|(_, v)| v.iter_mut()) {
                if let Some(t) = e.stamp_mut() {
                    *t = clock.to_ns(*t);
                }
            }
            for r in batch.defs.iter_mut() {
                if let Some(t) = crate::event::record_stamp_mut(r) {
                    *t = clock.to_ns(*t);
                }
            }
        }
        // Taken by the pass that serves the flush asked for after it was
        // set (so it follows what was recorded before), or the last. One
        // taken before the file opens is moot (no trace); a later one
        // supersedes an earlier (an exec that failed).
        let ending = if stopping || requested > FLUSH_DONE.load(Ordering::Acquire) {
            ending::take()
        } else {
            None
        };
        if matches!(sink, Sink::Pending) {
            let active = batch.threads.iter().any(|(_, v)| {
                v.iter()
                    .any(|e| !matches!(e, Event::Other(r) if !is_activity(r)))
            }) || batch.defs.iter().any(is_activity);
            if active {
                sink = open();
            } else {
                // Nothing worth a file yet: keep the definitions (and any
                // diagnostics) for when there is.
                held.append(&mut batch.defs);
                for (tid, v) in batch.threads.iter_mut() {
                    held.extend(v.drain(..).map(|e| e.into_record(*tid)));
                }
            }
        }
        let dropped = sink::DROPPED.load(Ordering::Relaxed);
        if stopping && dropped > dropped_written {
            batch.defs.push(Record::Dropped {
                source: DropSource::Collector,
                count: dropped - dropped_written,
            });
            dropped_written = dropped;
        }
        if let Sink::Open(w) = &mut sink {
            let end = if stopping {
                Some(ending.unwrap_or_else(ending::take_final))
            } else {
                ending
            };
            // What a fatal signal hit, after the records before it and
            // before the End it explains.
            let crash = crate::crash::take().map(crash_record);
            let res = held
                .drain(..)
                .try_for_each(|r| w.write(&r))
                .and_then(|_| write_batch(w, &mut batch))
                .and_then(|_| crash.map_or(Ok(()), |c| w.write(&c)))
                .and_then(|_| end.map_or(Ok(()), |e| w.write(&Record::End(e))))
                .and_then(|_| w.flush());
            if let Err(e) = res {
                let path = TRACE_PATH
                    .lock()
                    .ok()
                    .and_then(|p| p.clone())
                    .unwrap_or_default();
                note::error(&format!(
                    "cannot write trace {path}: {e}; recording stops here, the program continues"
                ));
                sink = Sink::Failed;
            }
        }
        if matches!(sink, Sink::Failed) {
            sink::DROPPED.fetch_add(batch.len() as u64, Ordering::Relaxed);
        }
        // Keep the emptied vectors (and their capacity) for the next swap.
        batch.defs.clear();
        for (_, mut v) in batch.threads.drain(..) {
            v.clear();
            if spares.len() < 64 {
                spares.push(v);
            }
        }
        FLUSH_DONE.fetch_max(requested, Ordering::AcqRel);
        if stopping {
            if let Sink::Open(w) = sink {
                let _ = w.finish();
            }
            RUNNING.store(false, Ordering::Release);
            FINISHED.store(true, Ordering::Release);
            return;
        }
    }
}

fn crash_record(c: crate::crash::Noted) -> Record {
    let name = |cbid| {
        DEVICE_SIDE.get().map_or_else(
            || format!("driver call {cbid}"),
            |s| (s.driver_call_name)(cbid),
        )
    };
    Record::Crash(accprof_trace::Crash {
        time_ns: c.time_ns,
        thread: c.thread,
        signal: c.signal,
        code: c.code,
        address: c.address,
        driver_call: c.driver_call.map(|(cbid, corr)| (name(cbid), corr)),
    })
}

/// Writes definitions first (they precede their uses), then each thread's
/// events as trace records. Written events are taken out of `batch`.
fn write_batch(
    w: &mut Writer<BufWriter<File>>,
    batch: &mut sink::Batch,
) -> Result<(), accprof_trace::TraceError> {
    for r in &batch.defs {
        w.write(r)?;
    }
    let mut n = batch.defs.len() as u64;
    for (tid, v) in batch.threads.iter_mut() {
        for e in v.drain(..) {
            w.write(&e.into_record(*tid))?;
            n += 1;
            if n >= PROGRESS_STEP {
                WRITTEN.fetch_add(n, Ordering::Relaxed);
                n = 0;
            }
        }
    }
    WRITTEN.fetch_add(n, Ordering::Relaxed);
    Ok(())
}

fn open() -> Sink {
    // The header says whether CUPTI records: let its start finish first.
    if let Some(side) = DEVICE_SIDE.get() {
        (side.await_start)(crate::config::DEVICE_START_WAIT);
    }
    let header = crate::header::build();
    let (file, path) = match crate::output::create(header.pid, &header.host, header.rank) {
        Ok(opened) => opened,
        Err(e) => {
            note::error(&format!(
                "{e}; nothing will be recorded, the program continues"
            ));
            return Sink::Failed;
        }
    };
    let shown = path.display().to_string();
    match Writer::new(BufWriter::with_capacity(256 << 10, file), &header) {
        Ok(w) => {
            crate::output::add_to_manifest(header.pid, &path);
            if let Ok(mut p) = TRACE_PATH.lock() {
                *p = Some(shown);
            }
            Sink::Open(w)
        }
        Err(e) => {
            note::error(&format!("cannot write trace {shown}: {e}"));
            Sink::Failed
        }
    }
}

/// In a forked child: the parent's writer thread does not exist here.
pub fn reset_after_fork() {
    RUNNING.store(false, Ordering::Release);
    FINISHED.store(false, Ordering::Release);
    FLUSH_REQUESTED.store(0, Ordering::Release);
    FLUSH_DONE.store(0, Ordering::Release);
    if let Ok(mut p) = TRACE_PATH.try_lock() {
        *p = None;
    }
}
