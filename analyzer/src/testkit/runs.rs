//! Hand-built runs for the rules' tests: sites, constructs, transfers,
//! kernels and allocations put into a [`Run`] directly, on a clock that
//! every helper advances, and one rule run on them.

use accprof_trace::{Clock, CopyKind, Device, HashMode, Header, MemoryKind, SourceState, Sources};

use crate::join::{At, Sink};
use crate::model::{
    AllocId, ApiRoutine, Construct, ConstructClass, ConstructId, DeviceAlloc, Kernel, KernelId,
    KernelSource, LaunchRequest, Run, Site, SiteId, Transfer, TransferId, TransferSource,
};
use crate::rules::{Checked, Context, Options};
use crate::source::SourceSet;
use crate::summary::SummarySink;

/// Builds a [`Run`] entity by entity.
pub struct RunBuilder {
    pub run: Run,
    /// The clock: every helper that advances time moves it.
    pub t: u64,
    next_ptr: u64,
    /// The kernels, transfers and allocations, put into the run by
    /// [`RunBuilder::build`].
    pub constructs: Vec<Construct>,
    pub kernels: Vec<Kernel>,
    pub transfers: Vec<Transfer>,
    pub allocs: Vec<DeviceAlloc>,
}

/// A buffer as a compute construct maps it: host pointer, bytes, hash.
#[derive(Clone, Copy)]
pub struct Buf {
    pub ptr: u64,
    pub bytes: u64,
    pub hash: u64,
}

impl RunBuilder {
    pub fn new(hashing: HashMode) -> RunBuilder {
        let header = Header {
            host: "test".into(),
            pid: 1,
            rank: None,
            command_line: vec!["./app".into()],
            executable: String::new(),
            start_unix_ns: 0,
            start_clock_ns: 0,
            clock: Clock::Monotonic,
            runtime: "GCC libgomp (test)".into(),
            collector: "accprof test".into(),
            sources: Sources {
                acc_prof: SourceState::Active,
                cupti: SourceState::Active,
                hashing,
                coherence: false,
            },
            process_start_ns: None,
        };
        let mut run = Run::empty(header);
        run.process.devices = vec![Device {
            id: 0,
            name: "Test GPU".into(),
            sm_count: 100,
            compute_capability: (9, 0),
            global_memory_bytes: 1 << 34,
        }];
        run.summary = SummarySink::new().finish(run.process.clone());
        RunBuilder {
            run,
            t: 1_000,
            next_ptr: 0x10_0000,
            constructs: Vec::new(),
            kernels: Vec::new(),
            transfers: Vec::new(),
            allocs: Vec::new(),
        }
    }

    pub fn no_cupti(mut self) -> Self {
        self.run.process.header.sources.cupti = SourceState::Inactive("test".into());
        self
    }

    pub fn buf(&mut self, bytes: u64, hash: u64) -> Buf {
        let ptr = self.next_ptr;
        self.next_ptr += bytes.next_multiple_of(4096) + 4096;
        Buf { ptr, bytes, hash }
    }

    pub fn site(&mut self, file: &str, line: u32) -> SiteId {
        let s = Site {
            file: file.into(),
            function: "main".into(),
            line: Some(line),
            address: None,
        };
        if let Some(i) = self.run.process.sites.iter().position(|x| *x == s) {
            return SiteId::at(i);
        }
        self.run.process.sites.push(s);
        SiteId::at(self.run.process.sites.len() - 1)
    }

    /// Records the frames above `site`, innermost first, as (file,
    /// function, line of the call).
    pub fn callers(&mut self, site: SiteId, frames: &[(&str, &str, u32)]) {
        let frames = frames
            .iter()
            .map(|&(file, function, line)| Site {
                file: file.into(),
                function: function.into(),
                line: Some(line),
                address: None,
            })
            .collect();
        self.run.set_callers(site, frames);
    }

    /// The handle of an API routine, by name.
    pub fn routine(&mut self, name: &str) -> ApiRoutine {
        let i = match self.run.process.routines.iter().position(|n| n == name) {
            Some(i) => i,
            None => {
                self.run.process.routines.push(name.into());
                self.run.process.routines.len() - 1
            }
        };
        ApiRoutine(i as u16)
    }

    pub fn open(
        &mut self,
        class: ConstructClass,
        site: SiteId,
        parent: Option<ConstructId>,
    ) -> ConstructId {
        let id = ConstructId::at(self.constructs.len());
        let mut c = Construct::new(class, None, site, 1, self.t, parent);
        c.implicit = parent.is_some();
        self.constructs.push(c);
        self.t += 1_000;
        id
    }

    pub fn close(&mut self, id: ConstructId) {
        self.t += 1_000;
        let t = self.t;
        self.construct_mut(id).set_end_ns(Some(t));
        self.t += 1_000;
    }

    pub fn copy(&mut self, construct: ConstructId, kind: CopyKind, b: Buf, ns: u64) -> TransferId {
        let (src, dst) = match kind {
            CopyKind::HostToDevice => (MemoryKind::Pageable, MemoryKind::Device),
            _ => (MemoryKind::Device, MemoryKind::Pageable),
        };
        let mut t = Transfer::new(
            Some(construct),
            kind,
            b.bytes,
            self.t,
            self.t + ns,
            src,
            dst,
            TransferSource::Cupti,
        );
        t.set_host_ptr(Some(b.ptr));
        t.set_hash((self.run.process.header.sources.hashing != HashMode::Off).then_some(b.hash));
        t.set_device(0, 7, self.transfers.len() as u32);
        self.transfers.push(t);
        self.t += ns + 1_000;
        TransferId::at(self.transfers.len() - 1)
    }

    /// A launch of `construct`, and its kernel when CUPTI records.
    pub fn kernel(&mut self, construct: ConstructId, grid: u32, ns: u64) -> Option<KernelId> {
        let t = self.t;
        let name = self.run.intern_name("k");
        let mut l = LaunchRequest::new(
            construct,
            Some(name),
            Some(grid as u64),
            Some(1),
            Some(32),
            t,
        );
        l.set_end_ns(t + 500);
        self.run.launches.push(l);
        let id = self
            .run
            .cupti_active()
            .then(|| KernelId::at(self.kernels.len()));
        if id.is_some() {
            self.kernels.push(Kernel {
                construct: Some(construct),
                name,
                grid: [grid, 1, 1],
                block: [32, 1, 1],
                registers: 32,
                shared_bytes: 0,
                local_bytes_per_thread: 0,
                start_ns: self.t,
                end_ns: self.t + ns,
                device: 0,
                stream: 7,
                source: KernelSource::Cupti,
                launch: 0,
            });
        }
        self.t += ns + 1_000;
        id
    }

    pub fn alloc(&mut self, construct: ConstructId, bytes: u64) -> AllocId {
        self.allocs.push(DeviceAlloc::new(
            Some(construct),
            bytes,
            Some(0xd000_0000 + self.allocs.len() as u64 * 0x1000_0000),
            None,
            self.t,
        ));
        self.t += 100;
        AllocId::at(self.allocs.len() - 1)
    }

    pub fn free(&mut self, alloc: AllocId) {
        let t = self.t;
        self.alloc_mut(alloc).set_free_ns(Some(t));
        self.t += 100;
    }

    /// A compute construct the GCC way: an implicit enter data part that
    /// allocates and uploads `ins`, one kernel, an implicit exit data part
    /// that downloads `outs` (with the hashes given there) and frees.
    pub fn gcc_compute(
        &mut self,
        site: SiteId,
        ins: &[Buf],
        kernel_ns: u64,
        grid: u32,
        outs: &[Buf],
    ) -> ConstructId {
        let c = self.open(ConstructClass::Compute, site, None);
        let enter = self.open(ConstructClass::EnterData, site, Some(c));
        let bytes: u64 = ins.iter().chain(outs).map(|b| b.bytes).sum();
        let a = self.alloc(enter, bytes.max(1));
        for b in ins {
            self.copy(enter, CopyKind::HostToDevice, *b, 10_000);
        }
        self.close(enter);
        self.kernel(c, grid, kernel_ns);
        let exit = self.open(ConstructClass::ExitData, site, Some(c));
        for b in outs {
            self.copy(exit, CopyKind::DeviceToHost, *b, 10_000);
        }
        self.free(a);
        self.close(exit);
        self.close(c);
        c
    }

    // Changes to what the helpers made, for cases they do not cover.

    pub fn construct_mut(&mut self, id: ConstructId) -> &mut Construct {
        &mut self.constructs[id.index()]
    }

    /// Puts a construct at `start_ns..end_ns` (`None`: its end never came).
    pub fn set_span(&mut self, id: ConstructId, start_ns: u64, end_ns: Option<u64>) {
        let c = self.construct_mut(id);
        c.start_ns = start_ns;
        c.set_end_ns(end_ns);
    }

    /// Puts an allocation at `alloc_ns` and its free at `free_ns`.
    pub fn set_alloc_span(&mut self, id: AllocId, alloc_ns: u64, free_ns: Option<u64>) {
        let a = self.alloc_mut(id);
        a.alloc_ns = alloc_ns;
        a.set_free_ns(free_ns);
    }

    pub fn kernel_mut(&mut self, id: KernelId) -> &mut Kernel {
        &mut self.kernels[id.index()]
    }

    pub fn transfer_mut(&mut self, id: TransferId) -> &mut Transfer {
        &mut self.transfers[id.index()]
    }

    pub fn alloc_mut(&mut self, id: AllocId) -> &mut DeviceAlloc {
        &mut self.allocs[id.index()]
    }

    pub fn build(mut self) -> Run {
        self.run.process.span_ns = (0, self.t + 1_000);
        self.run.set_constructs(&self.constructs);
        if !self.run.cupti_active() {
            let launched = self.run.launched_kernels();
            self.kernels.extend(launched);
            self.kernels.sort_by_key(|k| k.start_ns);
        }
        self.run
            .set_entities(&self.kernels, &self.transfers, &self.allocs);
        self.run.derive();
        let mut s = SummarySink::new();
        replay(&self.run, &mut s);
        self.run.summary = s.finish(self.run.process.clone());
        self.run.name_summary();
        self.run
    }
}

// A run made by hand has no join to make its summary in the same pass as
// its entities: its entities are handed to the summary's sink afterwards,
// as the join would have handed them over.

/// Where construct `id` of a finished run stands, as the join said it
/// when it handed the construct's entities over.
fn at_of(run: &Run, id: ConstructId) -> At {
    let c = run.construct(id);
    let top = run.top_level(id);
    let t = run.construct(top);
    At {
        construct: id,
        thread: c.thread,
        line_site: run.line_site(id),
        top,
        top_class: t.class,
        host_ns: c.host_ns(),
        top_host_ns: t.host_ns(),
    }
}

/// Hands `run`'s entities to `s` as the join would have: the outermost
/// constructs open at the end first (only they can be in flight), then
/// the kernels, the transfers, and the constructs innermost first.
fn replay(run: &Run, s: &mut SummarySink) {
    let at = |id: ConstructId| at_of(run, id);
    for &o in &run.process.open_at_end {
        let top = run.top_level(o);
        s.started(top, &run.construct(top));
    }
    let kernels = (0..run.kernels().len()).map(KernelId::at);
    let transfers = (0..run.transfers().len()).map(TransferId::at);
    let constructs = (0..run.constructs().len()).rev().map(ConstructId::at);
    for id in kernels {
        let k = run.kernel(id);
        let (order, at) = ((k.start_ns, id.index() as u64), k.construct.map(at));
        s.kernel(&k, order, at.as_ref());
    }
    for id in transfers {
        let t = run.transfer(id);
        let (order, at) = ((t.start_ns, id.index() as u64), t.construct.map(at));
        s.transfer(&t, order, at.as_ref());
    }
    let open: std::collections::HashSet<ConstructId> =
        run.process.open_at_end.iter().copied().collect();
    for id in constructs {
        let launches: Vec<LaunchRequest> = run.launches_of(id).collect();
        s.construct(
            id,
            &run.construct(id),
            &launches,
            &at(id),
            open.contains(&id),
        );
    }
}

/// Runs one rule on a run with default options and no sources.
pub fn run_rule(run: &Run, rule: fn(&Context) -> Checked) -> Checked {
    let sources = SourceSet::default();
    let opts = Options::default();
    let cx = Context::new(run, &sources, &opts);
    rule(&cx)
}

/// Runs one rule with sources.
pub fn run_rule_with(run: &Run, sources: &SourceSet, rule: fn(&Context) -> Checked) -> Checked {
    let opts = Options::default();
    let cx = Context::new(run, sources, &opts);
    rule(&cx)
}
