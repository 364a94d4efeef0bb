//! R2: start-up that compiled the device code. GCC's nvptx back end emits
//! PTX for sm_30/sm_35, which no current GPU runs: the CUDA driver
//! compiles it for the device when the program loads its code, and keeps
//! the machine code in its cache (`~/.nv/ComputeCache`) for the next run
//! of the same binary. A run that misses the cache (a new machine, a
//! container, CI, every rebuild) pays the compilation at start-up; a
//! second run of the same binary skips it. Measured on an H200: NPB FT
//! class W 1.47-1.81 s with `CUDA_CACHE_DISABLE=1` against 0.40-0.44 s
//! with the cache warm.
//!
//! Evidence needed: the driver's timings of its code-loading calls
//! ([`crate::ledger::Ledger::paid_jit`]). The finding is made when the
//! code loading took at least [`crate::ledger::JIT_MIN_NS`] (a cached
//! module loads in 1-3 ms on the fixtures' H200 runs) and at least the
//! rules' share of the wall time ([`super::context::Options::min_share`]): below
//! that, start-up is not what the run's time is about.

use crate::findings::{Category, Confidence, Finding, Value};
use crate::units;

use super::context::{Checked, Context};

pub fn check(cx: &Context) -> Checked {
    let mut out = Checked::default();
    let ledger = cx.run.ledger();
    if ledger.paid_jit() != Some(true) || cx.share(ledger.module_load_ns) < cx.opts.min_share {
        return out;
    }
    let startup = ledger.startup_ns();
    let load = ledger.module_load_ns;
    let mut f = Finding::new(
        "R2",
        Category::Launch,
        format!(
            "CUDA start-up took {} ({:.0}% of the wall time), {} of it loading the device code: the driver compiled the program's PTX, which its cache did not hold",
            units::duration_ns(startup),
            100.0 * cx.share(startup),
            units::duration_ns(load),
        ),
    );
    f.confidence = Confidence::Likely;
    f.cost_ns = Some(load);
    // A module the cache holds loads in a few milliseconds: nearly all of
    // the loading goes.
    f.saving_ns = Some(load.saturating_sub(WARM_LOAD_NS.min(load)));
    f.evidence
        .field("startup_time", Value::Ns(startup))
        .field("code_loading_time", Value::Ns(load))
        .field("code_loading_calls", Value::Count(ledger.module_load_calls))
        .field("share_of_wall", Value::Ratio(cx.share(startup)))
        .field(
            "wall_without_startup",
            Value::Ns(ledger.wall_without_startup_ns()),
        );
    f.evidence.say(format!(
        "The driver's code-loading calls (cuModuleLoad*, cuLink*) took {} in {} calls; a module whose machine code the driver's cache holds loads in a few milliseconds (1-3 ms on an H200), so this run compiled its device code: GCC's nvptx back end emits PTX for sm_30/sm_35, which the driver compiles for this GPU at every run that misses its cache (a new machine, a container, CI, every rebuild).",
        units::duration_ns(load),
        ledger.module_load_calls,
    ));
    f.evidence.say(format!(
        "A second run of the same binary on this machine finds the code in the cache and skips it: without its start-up this run took {}, and the other findings give their share of that too.",
        units::duration_ns(ledger.wall_without_startup_ns()),
    ));
    f.proposal.text = "Keep the driver's compute cache between runs: leave CUDA_CACHE_DISABLE unset, set CUDA_CACHE_MAXSIZE large enough for every binary you run (in bytes, e.g. CUDA_CACHE_MAXSIZE=4294967296; the default of 256 MiB evicts the code of large programs), and CUDA_CACHE_PATH to persistent storage (not a container's throw-away layer or a job's temporary directory; in CI, cache that directory between jobs). Measure and compare runs with the cache warm: run the binary once before timing it (`accprof diff`, `analyze --verify` and `tune` say when one run compiled its code and the other did not).".into();
    f.proposal.no_patch = Some(
        "the cache is the driver's, set in the environment: nothing to change in the source".into(),
    );
    out.findings.push(f);
    out
}

/// What loading a module the cache holds takes: the largest of the
/// fixtures' warm runs on the H200 (1-3 ms).
const WARM_LOAD_NS: u64 = 3_000_000;
