//! Hand-built runs for the rules' tests: sites, constructs, transfers,
//! kernels and allocations made on a clock that every helper advances,
//! written as the collector's records and read through the join as a
//! trace is (so the summary and the ledger are made the one way), and
//! one rule run on them.

use accprof_trace::{
    AccDetail, AccEvent, AccEventKind, ApiCall, ApiPhase, BufferHash, Clock, CopyKind, DataInfo,
    Device, Direction, DriverApi, DriverCall, HashMode, Header, KernelRecord, LaunchInfo,
    MemcpyRecord, MemoryKind, Record, RegionId, SourceLocation, SourceState, Sources, StringId,
};

use crate::model::{
    AllocId, ApiRoutine, Construct, ConstructClass, ConstructId, DeviceAlloc, Kernel, KernelId,
    KernelSource, LaunchRequest, Run, Site, SiteId, Transfer, TransferId, TransferSource,
};
use crate::rules::{Checked, Context, Options};
use crate::source::SourceSet;

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

    /// The region id the records of construct `id` carry (what a hash
    /// made inside it names).
    pub fn region(&self, id: ConstructId) -> RegionId {
        RegionId(id.index() as u64 + 1)
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

    /// The run as `accprof` would read it from a trace: the constructs,
    /// launches, kernels, transfers, allocations and hashes written as the
    /// collector's records, in time order, and built through the join.
    /// The join numbers the constructs in start order and the sites as
    /// the constructs first use them, as it does a trace's. What a trace
    /// holds only through the program's binary is not in the records: the
    /// callers of a site are set after the join, and an API routine call
    /// (whose site is its call site in the binary) stands at an unknown
    /// site. A transfer's runtime name comes with acc_prof's copy events,
    /// so only without CUPTI ([`RunBuilder::no_cupti`]).
    pub fn build(mut self) -> Run {
        let records = self.records();
        let callers = std::mem::take(&mut self.run.process.callers);
        let header = self.run.process.header.clone();
        let mut run = crate::testkit::trace::build(header, records);
        // A site no construct used comes with no record: a test that named
        // one (to read its source) finds it after the others.
        for s in &self.run.process.sites {
            if !run.process.sites.contains(s) {
                run.process.sites.push(s.clone());
            }
        }
        for (site, frames) in callers {
            let s = self.run.site(site);
            if let Some(i) = run.process.sites.iter().position(|x| x == s) {
                run.set_callers(SiteId::at(i), frames);
            }
        }
        run
    }

    /// The records a collector would have written for this run.
    fn records(&self) -> Vec<Record> {
        let mut w = Writer::default();
        let run = &self.run;
        for d in &run.process.devices {
            w.head.push(Record::Device(d.clone()));
        }
        let region = |c: Option<ConstructId>| c.map_or(RegionId(0), |c| self.region(c));
        let thread = |c: Option<ConstructId>| c.map_or(1, |c| self.constructs[c.index()].thread);
        for (i, c) in self.constructs.iter().enumerate() {
            let id = ConstructId::at(i);
            let r = region(Some(id));
            if let ConstructClass::ApiCall(routine) = c.class {
                let routine = w.string(&run.process.routines[routine.0 as usize]);
                let call = |time_ns, phase| {
                    Record::Api(ApiCall {
                        time_ns,
                        thread: c.thread,
                        region: r,
                        phase,
                        routine,
                        call_site: None,
                        host_ptr: None,
                        bytes: None,
                        async_queue: c.async_queue(),
                    })
                };
                w.at(c.start_ns, START, i, call(c.start_ns, ApiPhase::Start));
                if let Some(end) = c.end_ns() {
                    w.at(end, END, usize::MAX - i, call(end, ApiPhase::End));
                }
                continue;
            }
            let (start, end) = match c.class {
                ConstructClass::Compute => (
                    AccEventKind::ComputeConstructStart,
                    AccEventKind::ComputeConstructEnd,
                ),
                ConstructClass::EnterData => {
                    (AccEventKind::EnterDataStart, AccEventKind::EnterDataEnd)
                }
                ConstructClass::ExitData => {
                    (AccEventKind::ExitDataStart, AccEventKind::ExitDataEnd)
                }
                ConstructClass::Update => (AccEventKind::UpdateStart, AccEventKind::UpdateEnd),
                ConstructClass::Wait => (AccEventKind::WaitStart, AccEventKind::WaitEnd),
                ConstructClass::ApiCall(_) => unreachable!("handled above"),
            };
            let site = run.site(c.site);
            let location = SourceLocation {
                file: Some(w.string(&site.file)),
                function: Some(w.string(&site.function)),
                line: site.line,
                ..SourceLocation::default()
            };
            let ev = |time_ns, kind| {
                Record::Acc(AccEvent {
                    time_ns,
                    kind,
                    thread: c.thread,
                    region: r,
                    device_type: c.device_type(),
                    device_number: c.device(),
                    async_queue: c.async_queue(),
                    construct: c.kind,
                    implicit: c.implicit,
                    location,
                    call_site: None,
                    detail: AccDetail::None,
                })
            };
            w.at(c.start_ns, START, i, ev(c.start_ns, start));
            if let Some(t) = c.end_ns() {
                w.at(t, END, usize::MAX - i, ev(t, end));
            }
        }
        let acc = |time_ns, kind, c: Option<ConstructId>, detail| {
            Record::Acc(AccEvent {
                time_ns,
                kind,
                thread: thread(c),
                region: region(c),
                device_type: Some(5),
                device_number: Some(0),
                async_queue: None,
                construct: None,
                implicit: false,
                location: SourceLocation::default(),
                call_site: None,
                detail,
            })
        };
        for l in &run.launches {
            let info = LaunchInfo {
                kernel_name: l.kernel_name.map(|n| w.string(run.name(n))),
                num_gangs: l.gangs(),
                num_workers: l.workers(),
                vector_length: l.vector_length(),
            };
            let c = Some(l.construct);
            let e = acc(
                l.start_ns,
                AccEventKind::EnqueueLaunchStart,
                c,
                AccDetail::Launch(info),
            );
            w.at(l.start_ns, INSIDE, 0, e);
            if let Some(end) = l.end_ns() {
                let e = acc(end, AccEventKind::EnqueueLaunchEnd, c, AccDetail::None);
                w.at(end, INSIDE, 0, e);
            }
        }
        // A device record's driver call is made inside its construct.
        let called_at = |c: Option<ConstructId>, t: u64| match c {
            Some(c) => self.constructs[c.index()].start_ns,
            None => t,
        };
        for (i, k) in self.kernels.iter().enumerate() {
            if !run.cupti_active() {
                break;
            }
            let correlation = 1_000_000 + i as u32;
            let call = Record::DriverCall(DriverCall {
                time_ns: called_at(k.construct, k.start_ns),
                thread: thread(k.construct),
                region: region(k.construct),
                correlation,
                api: DriverApi::Launch,
                host_ptr: None,
                bytes: None,
            });
            if k.construct.is_some() {
                w.at(called_at(k.construct, k.start_ns), INSIDE, 0, call);
            }
            let name = w.string(run.name(k.name));
            let rec = Record::Kernel(KernelRecord {
                start_ns: k.start_ns,
                end_ns: k.end_ns,
                name,
                grid: k.grid,
                block: k.block,
                registers: k.registers,
                static_shared_bytes: k.shared_bytes,
                dynamic_shared_bytes: 0,
                local_bytes_per_thread: k.local_bytes_per_thread,
                device: k.device,
                context: 1,
                stream: k.stream,
                correlation,
            });
            w.at(k.start_ns, DEVICE, 0, rec);
        }
        for t in &self.transfers {
            if !run.cupti_active() {
                // Without CUPTI, acc_prof's enqueue events are the copies,
                // with the runtime's name for them.
                let data = DataInfo {
                    var_name: t.variable.map(|n| w.string(run.name(n))),
                    bytes: Some(t.bytes),
                    host_ptr: t.host_ptr(),
                    device_ptr: None,
                };
                let (start, end) = match t.kind {
                    CopyKind::HostToDevice => (
                        AccEventKind::EnqueueUploadStart,
                        AccEventKind::EnqueueUploadEnd,
                    ),
                    _ => (
                        AccEventKind::EnqueueDownloadStart,
                        AccEventKind::EnqueueDownloadEnd,
                    ),
                };
                let e = acc(t.start_ns, start, t.construct, AccDetail::Data(data));
                w.at(t.start_ns, INSIDE, 0, e);
                let e = acc(t.end_ns, end, t.construct, AccDetail::None);
                w.at(t.end_ns, INSIDE, 0, e);
                continue;
            }
            let correlation = t.correlation().expect("a transfer of the kit");
            let time = called_at(t.construct, t.start_ns);
            if let (Some(hash), Some(ptr)) = (t.hash(), t.host_ptr()) {
                let h = Record::Hash(BufferHash {
                    time_ns: time,
                    region: region(t.construct),
                    correlation,
                    direction: match t.kind {
                        CopyKind::HostToDevice => Direction::Upload,
                        _ => Direction::Download,
                    },
                    host_ptr: ptr,
                    bytes: t.bytes,
                    mode: run.process.header.sources.hashing,
                    hash,
                    hash_ns: None,
                });
                w.at(time, INSIDE, 0, h);
            }
            let call = Record::DriverCall(DriverCall {
                time_ns: time,
                thread: thread(t.construct),
                region: region(t.construct),
                correlation,
                api: DriverApi::CopyOther,
                host_ptr: t.host_ptr(),
                bytes: Some(t.bytes),
            });
            w.at(time, INSIDE, 0, call);
            let rec = Record::Memcpy(MemcpyRecord {
                start_ns: t.start_ns,
                end_ns: t.end_ns,
                bytes: t.bytes,
                kind: t.kind,
                src: t.src,
                dst: t.dst,
                device: t.device().unwrap_or(0),
                context: 1,
                stream: t.stream().unwrap_or(0),
                correlation,
            });
            w.at(t.start_ns, DEVICE, 0, rec);
        }
        for a in &self.allocs {
            let data = DataInfo {
                var_name: a.variable.map(|n| w.string(run.name(n))),
                bytes: Some(a.bytes),
                host_ptr: None,
                device_ptr: a.device_ptr(),
            };
            let e = acc(
                a.alloc_ns,
                AccEventKind::Alloc,
                a.construct,
                AccDetail::Data(data),
            );
            w.at(a.alloc_ns, INSIDE, 0, e);
            if let Some(t) = a.free_ns() {
                let e = acc(t, AccEventKind::Free, a.construct, AccDetail::Data(data));
                w.at(t, INSIDE, 0, e);
            }
        }
        for h in &run.hashes {
            w.at(h.time_ns, INSIDE, 0, Record::Hash(*h));
        }
        w.finish()
    }
}

/// At one time: the ends first (the innermost first), then the starts,
/// then what happens inside the constructs, then the device's records.
const END: u8 = 0;
const START: u8 = 1;
const INSIDE: u8 = 2;
const DEVICE: u8 = 3;

/// Records with the times they are written at, and the strings they name.
#[derive(Default)]
struct Writer {
    head: Vec<Record>,
    strings: Vec<String>,
    timed: Vec<(u64, u8, usize, usize, Record)>,
}

impl Writer {
    fn string(&mut self, text: &str) -> StringId {
        let i = match self.strings.iter().position(|s| s == text) {
            Some(i) => i,
            None => {
                self.strings.push(text.to_string());
                self.strings.len() - 1
            }
        };
        StringId(i as u32 + 1)
    }

    fn at(&mut self, t: u64, rank: u8, key: usize, r: Record) {
        let seq = self.timed.len();
        self.timed.push((t, rank, key, seq, r));
    }

    fn finish(mut self) -> Vec<Record> {
        self.timed.sort_by_key(|x| (x.0, x.1, x.2, x.3));
        let strings = self
            .strings
            .into_iter()
            .enumerate()
            .map(|(i, text)| Record::String {
                id: StringId(i as u32 + 1),
                text,
            });
        let mut out: Vec<Record> = strings.collect();
        out.extend(self.head);
        out.extend(self.timed.into_iter().map(|x| x.4));
        out
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
