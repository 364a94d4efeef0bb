//! What a run cannot show about its OpenACC runtime, measured on the GPU
//! machine: one table, each fact with the runtime it holds for and where
//! it was measured. Rules quote a fact where the run itself has no
//! evidence for the question (a run with no async construct says nothing
//! of what an async construct costs).

use crate::Run;

/// A question a rule may need answered beyond the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Topic {
    /// What launching on an async queue costs the host against a
    /// synchronous launch.
    AsyncLaunch,
}

/// One measured fact.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fact {
    pub topic: Topic,
    /// The runtime it holds for, as the trace names it (a part of its name).
    pub runtime: &'static str,
    /// The runtime as a sentence names it.
    pub name: &'static str,
    /// Where and when it was measured.
    pub measured_on: &'static str,
    /// What was measured, as a clause.
    pub text: &'static str,
}

const FACTS: &[Fact] = &[Fact {
    topic: Topic::AsyncLaunch,
    runtime: "libgomp",
    name: "GCC's libgomp",
    measured_on: "an NVIDIA H200 (2026-11-26)",
    text: "the small_kernels sample (8 300) ran 1.25x slower with its compute_rhs and solve constructs queued this way (504 -> 628 ms, 9 interleaved rounds), and launch_storm measured 63-72 us per async launch against 28 us per synchronous one",
}];

/// The fact about `topic` for the run's runtime, if one was measured.
pub fn about(run: &Run, topic: Topic) -> Option<&'static Fact> {
    let runtime = &run.process.header.runtime;
    FACTS
        .iter()
        .find(|f| f.topic == topic && runtime.contains(f.runtime))
}
