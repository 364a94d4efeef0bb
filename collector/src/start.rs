//! The library's life: what runs when it loads (the constructor, or the
//! runtime's `acc_register_library`), starting the writer, the call sites,
//! the signal handlers, the coherence check and CUPTI in that order; the
//! final flush from its destructor; and the fork handlers. Everything else
//! of the collector is started from here and calls nothing back.

use std::ffi::c_void;
use std::time::Duration;

use accprof_trace::SourceState;

#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
use crate::api;
#[cfg(not(test))]
use crate::interpose;
use crate::signals::life::set_own_pid;
use crate::{
    accprof, callsite, clock, coherence, config, crash, cupti, ending, header, next_fns, note,
    output, signals, sink, state, summary_at_exit, tls, writer,
};

/// How long exit waits for the last records to reach the file without the
/// writer making progress (a large backlog is waited for while it is being
/// written, within a cap; see `writer::stop`).
const EXIT_WAIT: Duration = Duration::from_secs(5);

/// The NVHPC / ACC_PROFLIB registration route, called by the runtime.
///
/// # Safety
/// Called by an OpenACC runtime with its registration functions.
#[no_mangle]
pub unsafe extern "C" fn acc_register_library(
    register: Option<accprof::AccProfReg>,
    _unregister: Option<accprof::AccProfReg>,
    _lookup: Option<accprof::AccProfLookup>,
) {
    let _ = std::panic::catch_unwind(|| {
        init();
        if !state::enabled() {
            return;
        }
        if let Some(reg) = register {
            // SAFETY: the runtime hands us its own acc_prof_register.
            unsafe { accprof::register_all(reg, "acc_register_library") };
            start_cupti();
        }
    });
}

/// Runs in every process that loads the library (preload or ACC_PROFLIB).
#[cfg_attr(test, allow(dead_code))]
extern "C" fn constructor() {
    let _ = std::panic::catch_unwind(|| {
        init();
        if !state::enabled() {
            return;
        }
        // The LD_PRELOAD route: libgomp accepts a direct acc_prof_register
        // call before any OpenACC construct runs.
        // SAFETY: dlsym with a NUL-terminated name; the symbol, when present,
        // is the runtime's acc_prof_register with the standard signature.
        unsafe {
            let sym = libc::dlsym(libc::RTLD_DEFAULT, c"acc_prof_register".as_ptr());
            if !sym.is_null() {
                let reg: accprof::AccProfReg = std::mem::transmute::<*mut c_void, _>(sym);
                accprof::register_all(reg, "acc_prof_register from LD_PRELOAD");
                start_cupti();
            }
        }
    });
}

// Not in this crate's own unit-test binary: it would profile the test runner.
#[cfg(not(test))]
#[used]
#[link_section = ".init_array"]
static CONSTRUCTOR: extern "C" fn() = constructor;

#[cfg_attr(test, allow(dead_code))]
extern "C" fn destructor() {
    let _ = std::panic::catch_unwind(finish);
}

#[cfg(not(test))]
#[used]
#[link_section = ".fini_array"]
static DESTRUCTOR: extern "C" fn() = destructor;

/// One-time start: config, writer, call sites, CUPTI, signals, fork.
fn init() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        resolve_before_handlers();
        let cfg = config::config();
        if cfg.disabled {
            return;
        }
        header::mark_start();
        clock::init(cfg.allow_tsc);
        if !state::enable() {
            return;
        }
        for w in &cfg.warnings {
            note::error(w);
        }
        writer::set_device_side(writer::DeviceSide {
            await_start: cupti::await_start,
            flush: cupti::flush,
            driver_call_name: cupti::driver_call_name,
        });
        sink::set_writer_starter(start_writer_in_child);
        if let Err(e) = writer::start() {
            state::disable(&e);
            return;
        }
        callsite::init();
        set_own_pid(std::process::id());
        signals::install();
        // After the collector's own handlers: faults that are not the
        // check's go on to them.
        coherence::start();
        // No atexit handler: the final flush runs from the library's
        // destructor. An atexit entry of ours takes part in glibc's exit
        // handling, which OpenACC runtimes enter twice at once when they
        // die of a device error (libgomp calls exit from the driver's
        // callback thread while the main thread fails too), and there it
        // crashed programs that bare exit with status 1.
        // SAFETY: registering plain extern "C" functions with no arguments.
        unsafe {
            libc::pthread_atfork(Some(fork_prepare), Some(fork_parent), Some(fork_child));
        }
    });
}

/// Starts CUPTI once an OpenACC runtime has registered the collector, so
/// processes without one (shells, wrappers, launcher daemons) never pay for
/// it; the header says which.
fn start_cupti() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if config::config().cupti {
            cupti::start_in_background(|r| {
                header::set(
                    &header::CUPTI,
                    match r {
                        Ok(()) => SourceState::Active,
                        Err(reason) => SourceState::Inactive(reason),
                    },
                )
            });
        } else {
            header::set(
                &header::CUPTI,
                SourceState::Inactive("turned off (ACCPROF_CUPTI=0)".into()),
            );
        }
    });
}

/// Looks up, once, every function of another object that a signal handler
/// may call, before any handler of ours is installed and whether or not the
/// collector records (the interposers forward through them either way):
/// a handler reads them with one load and never calls `dlsym` (see
/// `signals`). An interposer called before the library's constructor (by
/// another library's) calls this first.
pub(crate) fn resolve_before_handlers() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        signals::SIGACTION.set(0, next_fns::next(c"sigaction"));
        #[cfg(not(test))]
        interpose::resolve_all();
        #[cfg(not(test))]
        coherence::calls::resolve_all();
    });
}

/// Final flush at exit (the library's destructor), once.
fn finish() {
    // Its last records and its note, while records are still taken.
    coherence::at_exit();
    if !state::begin_stop() {
        return;
    }
    // A program that ends before CUPTI has started (it never used the
    // device) must not race the start.
    cupti::await_start(config::DEVICE_START_WAIT);
    cupti::finish_at_exit(ending::exit_status());
    if !writer::stop(EXIT_WAIT, false) {
        note::error("the trace writer did not finish in time; the trace may miss its last records");
    } else if let Some(path) = writer::TRACE_PATH.try_lock().ok().and_then(|p| p.clone()) {
        summary_at_exit::print_summary(&path);
        note::info(&format!("trace written to {path}"));
    }
}

extern "C" fn fork_prepare() {
    let _ = std::panic::catch_unwind(sink::fork_prepare);
}

extern "C" fn fork_parent() {
    let _ = std::panic::catch_unwind(sink::fork_parent);
}

extern "C" fn fork_child() {
    let _ = std::panic::catch_unwind(|| {
        tls::forget_own_threads();
        sink::fork_child();
        clock::reset_thread_id();
        callsite::reset_after_fork();
        #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
        api::reset_after_fork();
        cupti::forget_after_fork();
        writer::reset_after_fork();
        ending::reset_after_fork();
        crash::reset_after_fork();
        output::mark_forked_child();
        set_own_pid(std::process::id());
        sink::want_writer();
    });
}

/// Starts the writer in a forked child on its first record (the sink asks,
/// once [`sink::want_writer`] was said), so a child that execs at once
/// leaves no file behind.
fn start_writer_in_child() {
    if let Err(e) = writer::start() {
        state::disable(&e);
    }
}
