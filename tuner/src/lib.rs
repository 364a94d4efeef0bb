//! accprof-tuner: sweeps of gang/worker/vector settings over one loop nest:
//! patch, rebuild, run under the collector, time the kernel on the device, and
//! keep statistics, a result cache and the winning patch.
//!
//! Programs are run through a trait so the search is testable without a GPU.
