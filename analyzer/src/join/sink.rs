//! What the join hands its entities to: the [`Sink`] trait, where an
//! entity's construct stands ([`At`]), and [`Both`], two sinks fed in one
//! pass.

use accprof_trace::{BufferHash, DriverSpan, OwnWork};

use crate::model::{
    AllocId, Construct, ConstructClass, ConstructId, DeviceAlloc, Kernel, LaunchRequest, Memset,
    Process, SiteId, Transfer,
};

/// Where an entity's construct stands, as the join knows it when the
/// entity is handed over.
#[derive(Debug, Clone, Copy)]
pub struct At {
    pub construct: ConstructId,
    /// The host thread it runs on.
    pub thread: u32,
    /// The site every view reports the construct at.
    pub line_site: SiteId,
    /// The outermost construct containing it (itself when top-level).
    pub top: ConstructId,
    pub top_class: ConstructClass,
    /// Host time of the construct (None while open or when its end never
    /// came).
    pub host_ns: Option<u64>,
    /// Host time of the outermost construct: known for kernels (handed
    /// over once it ended), None for the others.
    pub top_host_ns: Option<u64>,
}

/// The order of a kernel, transfer or memset in the run: start time, then
/// the order the trace gave them (CUPTI records as read, then the
/// runtime's events).
pub type Order = (u64, u64);

/// Takes the join's finished entities as they come.
pub trait Sink {
    type Output;
    /// Told once, before anything else, whether the trace can hold timed
    /// driver calls ([`Sink::driver_span`]) or the collector's own work
    /// ([`Sink::own_work`]): a trace of a format before 1.4, or one
    /// recorded without CUPTI and without the coherence check, holds none,
    /// so a sink need not keep anything for spans to come.
    fn driver_spans_possible(&mut self, _possible: bool) {}
    /// A construct started (before anything of its own is handed over).
    fn started(&mut self, _id: ConstructId, _c: &Construct) {}
    /// A construct is final: it ended, was cut, or was open when the trace
    /// ended (`open_at_end`). Its kernels, transfers and memsets were
    /// handed over before it; `launches` are the runtime's launch events.
    fn construct(
        &mut self,
        id: ConstructId,
        c: &Construct,
        launches: &[LaunchRequest],
        at: &At,
        open_at_end: bool,
    );
    fn kernel(&mut self, k: &Kernel, order: Order, at: Option<&At>);
    fn transfer(&mut self, t: &Transfer, order: Order, at: Option<&At>);
    fn memset(&mut self, m: &Memset, order: Order, at: Option<&At>);
    /// An allocation as it is made, with its handle in allocation order
    /// ([`Sink::freed`] follows when its free comes).
    fn alloc(&mut self, _id: AllocId, _a: &DeviceAlloc) {}
    /// The allocation `id` was freed at `free_ns`.
    fn freed(&mut self, _id: AllocId, _free_ns: u64) {}
    /// A host buffer's hash, with where its construct stands (None when
    /// its region is not open).
    fn hash(&mut self, _h: &BufferHash, _at: Option<&At>) {}
    /// A timed driver call, as the trace gives it (CUPTI hands them over
    /// in batches, after the constructs they ran in).
    fn driver_span(&mut self, _d: &DriverSpan) {}
    /// A stretch of the collector's own work (the coherence check's).
    fn own_work(&mut self, _w: &OwnWork) {}
    fn finish(self, info: Process) -> Self::Output;
}

/// Two sinks fed by one join, in one pass over the trace: the model and
/// its summary are made together, never one replayed from the other.
pub struct Both<A, B>(pub A, pub B);

impl<A: Sink, B: Sink> Sink for Both<A, B> {
    type Output = (A::Output, B::Output);
    fn driver_spans_possible(&mut self, possible: bool) {
        self.0.driver_spans_possible(possible);
        self.1.driver_spans_possible(possible);
    }
    fn started(&mut self, id: ConstructId, c: &Construct) {
        self.0.started(id, c);
        self.1.started(id, c);
    }
    fn construct(
        &mut self,
        id: ConstructId,
        c: &Construct,
        launches: &[LaunchRequest],
        at: &At,
        open_at_end: bool,
    ) {
        self.0.construct(id, c, launches, at, open_at_end);
        self.1.construct(id, c, launches, at, open_at_end);
    }
    fn kernel(&mut self, k: &Kernel, order: Order, at: Option<&At>) {
        self.0.kernel(k, order, at);
        self.1.kernel(k, order, at);
    }
    fn transfer(&mut self, t: &Transfer, order: Order, at: Option<&At>) {
        self.0.transfer(t, order, at);
        self.1.transfer(t, order, at);
    }
    fn memset(&mut self, m: &Memset, order: Order, at: Option<&At>) {
        self.0.memset(m, order, at);
        self.1.memset(m, order, at);
    }
    fn alloc(&mut self, id: AllocId, a: &DeviceAlloc) {
        self.0.alloc(id, a);
        self.1.alloc(id, a);
    }
    fn freed(&mut self, id: AllocId, free_ns: u64) {
        self.0.freed(id, free_ns);
        self.1.freed(id, free_ns);
    }
    fn hash(&mut self, h: &BufferHash, at: Option<&At>) {
        self.0.hash(h, at);
        self.1.hash(h, at);
    }
    fn driver_span(&mut self, d: &DriverSpan) {
        self.0.driver_span(d);
        self.1.driver_span(d);
    }
    fn own_work(&mut self, w: &OwnWork) {
        self.0.own_work(w);
        self.1.own_work(w);
    }
    fn finish(self, info: Process) -> Self::Output {
        let b = self.1.finish(info.clone());
        (self.0.finish(info), b)
    }
}
