//! The Chrome trace-event JSON sink (chrome://tracing, ui.perfetto.dev):
//! one complete event per slice, flow events from a construct to what it
//! caused, and the names of processes and threads as metadata events.

use std::collections::HashMap;
use std::io::{self, Write};

use super::sink::{Arg, Counts, Instant, Slice, TimelineSink, Track};
use crate::export::RunInput;

/// Chrome trace-event JSON: `{"traceEvents": [...]}` with one complete
/// ("X") event per slice, flow events ("s", "f") and name metadata.
pub struct ChromeSink<W: Write> {
    out: W,
    first: bool,
    /// Track id -> (pid, tid) of the Chrome format.
    tids: HashMap<u64, (u64, u64)>,
    pids: HashMap<u64, u64>,
}

impl<W: Write> ChromeSink<W> {
    pub fn new(mut out: W) -> io::Result<Self> {
        out.write_all(b"{\"displayTimeUnit\":\"ns\",\"traceEvents\":[")?;
        Ok(ChromeSink {
            out,
            first: true,
            tids: HashMap::new(),
            pids: HashMap::new(),
        })
    }

    fn sep(&mut self) -> io::Result<()> {
        self.out
            .write_all(if self.first { b"\n" } else { b",\n" })?;
        self.first = false;
        Ok(())
    }
}

impl<W: Write> ChromeSink<W> {
    /// `,"args":{...}` of an event.
    fn args(&mut self, args: &[(&'static str, Arg<'_>)]) -> io::Result<()> {
        self.out.write_all(b",\"args\":{")?;
        for (i, (k, v)) in args.iter().enumerate() {
            if i > 0 {
                self.out.write_all(b",")?;
            }
            write!(self.out, "\"{k}\":")?;
            match v {
                Arg::Str(x) => crate::table::json_str(&mut self.out, x)?,
                Arg::Int(x) => write!(self.out, "{x}")?,
            }
        }
        self.out.write_all(b"}")
    }
}

fn us(ns: u64) -> String {
    format!("{}.{:03}", ns / 1000, ns % 1000)
}

impl<W: Write> TimelineSink for ChromeSink<W> {
    fn process(&mut self, id: u64, _pid: u32, name: &str) -> io::Result<()> {
        // Chrome pids: the rank's position, so two ranks with one pid stay apart.
        let pid = self.pids.len() as u64 + 1;
        self.pids.insert(id, pid);
        self.sep()?;
        write!(
            self.out,
            "{{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{pid},\"args\":{{\"name\":"
        )?;
        crate::table::json_str(&mut self.out, name)?;
        self.out.write_all(b"}}")
    }

    fn track(&mut self, t: &Track) -> io::Result<()> {
        let pid = self.pids.get(&t.process).copied().unwrap_or(0);
        let tid = self.tids.len() as u64 + 1;
        self.tids.insert(t.id, (pid, tid));
        self.sep()?;
        write!(
            self.out,
            "{{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":{pid},\"tid\":{tid},\"args\":{{\"name\":"
        )?;
        crate::table::json_str(&mut self.out, &t.name)?;
        self.out.write_all(b"}},")?;
        write!(
            self.out,
            "\n{{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":{pid},\"tid\":{tid},\"args\":{{\"sort_index\":{}}}}}",
            t.sort
        )
    }

    fn slice(&mut self, s: &Slice<'_>) -> io::Result<()> {
        let (pid, tid) = self.tids.get(&s.track).copied().unwrap_or((0, 0));
        self.sep()?;
        self.out.write_all(b"{\"ph\":\"X\",\"name\":")?;
        crate::table::json_str(&mut self.out, s.name)?;
        write!(
            self.out,
            ",\"cat\":\"{}\",\"pid\":{pid},\"tid\":{tid},\"ts\":{},\"dur\":{}",
            s.category,
            us(s.start_ns),
            us(s.end_ns.saturating_sub(s.start_ns))
        )?;
        self.args(s.args)?;
        self.out.write_all(b"}")?;
        for f in s.flows_out {
            write!(
                self.out,
                ",\n{{\"ph\":\"s\",\"name\":\"caused\",\"cat\":\"flow\",\"id\":{f},\"pid\":{pid},\"tid\":{tid},\"ts\":{}}}",
                us(s.start_ns)
            )?;
        }
        if let Some(f) = s.flow_in {
            write!(
                self.out,
                ",\n{{\"ph\":\"f\",\"bp\":\"e\",\"name\":\"caused\",\"cat\":\"flow\",\"id\":{f},\"pid\":{pid},\"tid\":{tid},\"ts\":{}}}",
                us(s.start_ns)
            )?;
        }
        Ok(())
    }

    fn instant(&mut self, i: &Instant<'_>) -> io::Result<()> {
        let (pid, tid) = self.tids.get(&i.track).copied().unwrap_or((0, 0));
        self.sep()?;
        self.out.write_all(b"{\"ph\":\"i\",\"s\":\"t\",\"name\":")?;
        crate::table::json_str(&mut self.out, i.name)?;
        write!(
            self.out,
            ",\"cat\":\"{}\",\"pid\":{pid},\"tid\":{tid},\"ts\":{}",
            i.category,
            us(i.at_ns)
        )?;
        self.args(i.args)?;
        self.out.write_all(b"}")
    }

    fn finish(&mut self) -> io::Result<()> {
        self.out.write_all(b"\n]}\n")?;
        self.out.flush()
    }
}

/// The runs as Chrome trace-event JSON.
pub fn write_chrome<W: Write>(runs: &[RunInput<'_>], out: W) -> io::Result<Counts> {
    let mut sink = ChromeSink::new(out)?;
    super::walk::write(runs, &mut sink)
}
