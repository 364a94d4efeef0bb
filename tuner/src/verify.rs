//! Verify a patch: the original and the patched source built with the
//! user's command and run under the collector; outputs compared, and the
//! analyzer's numbers of both traces side by side.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use accprof_trace::SourceState;
use serde::{Deserialize, Serialize};

use crate::command;
use crate::error::{first_error, stderr_tail, Error};
use crate::key::text_hash;
use crate::runner::{RunOutput, Runner};

/// What to verify.
#[derive(Debug, Clone)]
pub struct VerifyPlan<'a> {
    /// The original source, where it was found.
    pub source: &'a Path,
    /// The original's text (the patched copy goes next to it when it
    /// includes local files, so that they resolve).
    pub source_text: &'a str,
    /// The patched source's text.
    pub patched_text: &'a str,
    /// What the patch applies, as the user should read it ("#1 L3, #2 D6").
    pub patch: String,
    /// Other files the patch changes, in the patch's order (by path).
    /// With any, or with `{dir}` in the build command, each version is
    /// built from a directory of copies (see [`verify`]).
    pub also: Vec<PatchedFile<'a>>,
    /// Build command template: `{src}` the source, `{out}` the program,
    /// `{dir}` the directory of copies.
    pub build: &'a str,
    /// Run command template: `{out}` the program.
    pub run: &'a str,
    /// Lines of stdout that start with one of these (after leading
    /// blanks) are not compared, besides "time:" (see [`compared_lines`]).
    pub ignore: &'a [String],
    /// Keep the builds, traces and the patched copy in this directory;
    /// without it they go to a temporary directory removed at the end.
    pub keep: Option<&'a Path>,
    /// Set by a signal handler: stop before the next build or run, with
    /// nothing left beside the source.
    pub stop: Option<&'a AtomicBool>,
}

/// A file the patch changes besides [`VerifyPlan::source`].
#[derive(Debug, Clone, Copy)]
pub struct PatchedFile<'a> {
    pub source: &'a Path,
    pub source_text: &'a str,
    pub patched_text: &'a str,
}

/// The result of [`verify`].
#[derive(Debug, Clone)]
pub struct Verified {
    pub source: PathBuf,
    /// The other files the patch changes.
    pub also: Vec<PathBuf>,
    pub patch: String,
    pub build: String,
    pub run: String,
    /// The beginnings of the stdout lines that were not compared.
    pub ignored: Vec<String>,
    pub before: Measured,
    pub after: Measured,
    /// What differs between the two runs; empty when nothing does.
    pub differences: Vec<Difference>,
    /// Where the builds, traces and outputs (`before.out`, `after.out`)
    /// were kept.
    pub kept: Option<PathBuf>,
}

impl Verified {
    /// The compared output is the same.
    pub fn same_output(&self) -> bool {
        !self
            .differences
            .iter()
            .any(|d| matches!(d, Difference::Line { .. } | Difference::LineCount { .. }))
    }

    /// Same output and same exit code: the patch kept the program's behaviour.
    pub fn ok(&self) -> bool {
        self.differences.is_empty()
    }
}

/// One way the patched run differs from the original.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Difference {
    /// The first compared stdout line that differs (numbered from 1), and
    /// how many other line pairs differ as well.
    Line {
        number: usize,
        before: String,
        after: String,
        others: usize,
    },
    /// The runs printed different numbers of compared lines.
    LineCount {
        before: usize,
        after: usize,
    },
    ExitCode {
        before: u8,
        after: u8,
    },
}

/// What one run measured. Device numbers come from the analyzer's summary
/// of its trace; the wall time is the process's, measured by the runner.
#[derive(Debug, Clone)]
pub struct Measured {
    pub code: u8,
    pub wall_ns: u64,
    /// The compared stdout lines (see [`compared_lines`]).
    pub lines: Vec<String>,
    /// Where the trace was written (gone after [`verify`] unless kept).
    pub trace: PathBuf,
    pub device: Result<DeviceTimes, NotMeasured>,
    /// Top-level OpenACC constructs reached.
    pub constructs: u64,
    /// The summary of its trace, for the per-line comparison.
    pub summary: Option<accprof_analyzer::summary::Summary>,
}

/// Device times of one run (CUPTI).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceTimes {
    pub transfer_ns: u64,
    pub transfers: u64,
    pub transfer_bytes: u64,
    pub kernel_ns: u64,
}

/// Why a run has no device times.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NotMeasured {
    /// Why CUPTI was inactive, as the collector recorded it.
    pub no_cupti: String,
    /// The program ran on the OpenACC host fallback.
    pub host_fallback: bool,
}

/// The beginning of the stdout lines never compared: the samples print
/// their timing there.
pub const TIME_LINES: &str = "time:";

/// The beginnings of the lines not compared: [`TIME_LINES`], then
/// `ignore` (the user's: a program's own timings, as NPB's "Time in
/// seconds" and "Mop/s").
pub fn ignored(ignore: &[String]) -> Vec<String> {
    std::iter::once(TIME_LINES.to_string())
        .chain(
            ignore
                .iter()
                .map(|x| x.trim_start().to_string())
                .filter(|x| !x.is_empty()),
        )
        .collect()
}

/// Lines compared between two runs: stdout without the lines that start
/// (after leading blanks) with "time:" or one of `ignore`.
pub fn compared_lines(stdout: &[u8], ignore: &[String]) -> Vec<String> {
    let skip = ignored(ignore);
    String::from_utf8_lossy(stdout)
        .lines()
        .filter(|l| {
            let l = l.trim_start();
            !skip.iter().any(|x| l.starts_with(x.as_str()))
        })
        .map(str::to_string)
        .collect()
}

/// `#include "x.h"` (C) or `include 'x.inc'` (Fortran): files found
/// relative to the source's directory.
pub fn has_local_includes(text: &str) -> bool {
    text.lines().any(|l| local_include(l).is_some())
}

/// The names of the files `text` includes with quotes, in order.
pub fn local_includes(text: &str) -> Vec<&str> {
    text.lines().filter_map(local_include).collect()
}

/// The quoted name of an include line (empty when the quote is not
/// closed), or None when the line is no include with quotes.
fn local_include(line: &str) -> Option<&str> {
    let t = line.trim_start().trim_start_matches('#').trim_start();
    let rest = match t.get(..7) {
        Some(w) if w.eq_ignore_ascii_case("include") => t[7..].trim_start(),
        _ => return None,
    };
    let quote = rest.chars().next().filter(|c| matches!(c, '"' | '\''))?;
    let name = &rest[1..];
    Some(name.find(quote).map_or("", |end| &name[..end]))
}

/// Removes the patched copy next to the source when verify ends.
struct Remove(Option<PathBuf>);

impl Drop for Remove {
    fn drop(&mut self) {
        if let Some(p) = &self.0 {
            let _ = std::fs::remove_file(p);
        }
    }
}

fn io(what: String) -> impl FnOnce(std::io::Error) -> Error {
    move |source| Error::Io { what, source }
}

/// Builds and runs the original and the patched source with `runner`,
/// compares their outputs and measures both traces.
///
/// With one patched file and no `{dir}` in the build command, the
/// original is built where it is and the patched copy in the work
/// directory (next to the original when it includes local files).
/// Otherwise each version gets its own directory (`before/` and `after/`
/// in the work directory) holding a copy of every patched file under its
/// own name, original or patched, and the files they include with quotes
/// (from their directory or below, so that the includes resolve); `{dir}`
/// is that directory and `{src}` the copy of the first patched file.
/// Several patched files need `{dir}`: otherwise the build would not
/// compile the patched copies.
pub fn verify<R: Runner + ?Sized>(
    runner: &mut R,
    plan: &VerifyPlan<'_>,
) -> Result<Verified, Error> {
    needs_dir(plan)?;
    let (work, _tmp) = work_dir(plan.keep)?;
    let versions = Versions::write(plan, &work)?;
    let [before, after] = versions
        .each()
        .map(|(label, template, source)| (label, template.to_string(), source.to_path_buf()));
    let mut build_and_run = |(label, template, source): (&str, String, PathBuf)| {
        let program = work.join(format!("{label}.bin"));
        build(runner, &template, &source, &program, label, plan.stop)?;
        run_and_measure(
            runner,
            (plan.run, plan.ignore),
            &program,
            &work,
            label,
            plan.stop,
        )
    };
    let before = build_and_run(before)?;
    let after = build_and_run(after)?;
    Ok(verified(plan, plan.build, before, after))
}

/// The list `analyze --verify --prebuild` leaves in its directory.
pub const PREBUILT_VERIFY: &str = "verify.json";

/// The original and the patched program built ahead of time
/// (`accprof analyze --verify --prebuild DIR`), for a machine that cannot
/// build them, with what they were built from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerifyPrebuilt {
    /// What the patch applies ("#1 L3, #2 D6").
    pub patch: String,
    /// The files the patch changes, in the patch's order.
    pub files: Vec<PrebuiltFile>,
    pub build: String,
    /// The original's program, a file name in the directory.
    pub before: String,
    /// The patched program, a file name in the directory.
    pub after: String,
}

/// A file a prebuilt patch changes: where it was found when it was built,
/// and xxh3 hashes of its text and of its patched text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrebuiltFile {
    pub source: String,
    pub source_hash: String,
    pub patched_hash: String,
}

impl VerifyPrebuilt {
    pub fn read(dir: &Path) -> Result<VerifyPrebuilt, Error> {
        crate::prebuilt::read(dir, PREBUILT_VERIFY, "accprof analyze --verify --prebuild")
    }

    /// What `plan`'s patch would be built from.
    fn files_of(plan: &VerifyPlan<'_>) -> Vec<PrebuiltFile> {
        plan.files()
            .map(|f| PrebuiltFile {
                source: f.source.display().to_string(),
                source_hash: format!("{:016x}", text_hash(f.source_text)),
                patched_hash: format!("{:016x}", text_hash(f.patched_text)),
            })
            .collect()
    }

    /// Whether these programs were built from `plan`'s sources and patch;
    /// the error names the directory and what differs. The sources are
    /// compared by name and text, not by path: the machine that runs them
    /// may hold its copy of the sources elsewhere.
    fn check(&self, dir: &Path, plan: &VerifyPlan<'_>) -> Result<(), Error> {
        let wanted = Self::files_of(plan);
        let name = |f: &PrebuiltFile| file_name(Path::new(&f.source));
        let names = |fs: &[PrebuiltFile]| fs.iter().map(name).collect::<Vec<_>>().join(", ");
        let same_files = wanted.len() == self.files.len()
            && wanted
                .iter()
                .zip(&self.files)
                .all(|(w, h)| name(w) == name(h));
        if same_files {
            if let Some(w) = wanted
                .iter()
                .zip(&self.files)
                .find(|(w, h)| w.source_hash != h.source_hash)
            {
                return Err(Error::Verify(format!(
                    "{}: built from another version of {} (rebuild them with --prebuild)",
                    dir.display(),
                    name(w.0)
                )));
            }
            if wanted
                .iter()
                .zip(&self.files)
                .all(|(w, h)| w.patched_hash == h.patched_hash)
            {
                return Ok(());
            }
        }
        Err(Error::Verify(format!(
            "{}: built for another patch ({} of {}), not this one ({} of {}): rebuild them with --prebuild",
            dir.display(),
            self.patch,
            names(&self.files),
            plan.patch,
            names(&wanted)
        )))
    }
}

/// Builds the original and the patched program of `plan` into `dir`
/// (for a machine that cannot build them), with [`PREBUILT_VERIFY`]
/// naming them and what they were built from; the copies the builds read
/// stay there as with `keep` (`before/` and `after/`, or the patched
/// copy). `plan.run` and `plan.keep` are not used.
pub fn prebuild<R: Runner + ?Sized>(
    runner: &mut R,
    plan: &VerifyPlan<'_>,
    dir: &Path,
) -> Result<VerifyPrebuilt, Error> {
    needs_dir(plan)?;
    create_dir(dir)?;
    let versions = Versions::write(plan, dir)?;
    let mut built = Vec::new();
    for (label, template, source) in versions.each() {
        let file = format!("{label}.bin");
        let program = dir.join(&file);
        let _ = std::fs::remove_file(&program);
        build(runner, template, source, &program, label, plan.stop)?;
        if !program.is_file() {
            return Err(Error::Verify(format!(
                "the build of the {label} version did not write {} (the build command needs {{out}})",
                program.display()
            )));
        }
        built.push(file);
    }
    let [before, after] = <[String; 2]>::try_from(built).map_err(|_| {
        Error::Verify("two versions are built, the original and the patched".to_string())
    })?;
    let pre = VerifyPrebuilt {
        patch: plan.patch.clone(),
        files: VerifyPrebuilt::files_of(plan),
        build: plan.build.to_string(),
        before,
        after,
    };
    crate::prebuilt::write(dir, PREBUILT_VERIFY, &pre)?;
    Ok(pre)
}

/// Runs the programs [`prebuild`] left in `dir` as [`verify`] runs the
/// ones it builds, once `pre` is known to be built from `plan`'s sources
/// and patch; `plan.build` is not used.
pub fn verify_prebuilt<R: Runner + ?Sized>(
    runner: &mut R,
    plan: &VerifyPlan<'_>,
    dir: &Path,
    pre: &VerifyPrebuilt,
) -> Result<Verified, Error> {
    pre.check(dir, plan)?;
    let programs = [("before", &pre.before), ("after", &pre.after)].map(|(l, f)| (l, dir.join(f)));
    for (label, p) in &programs {
        if !p.is_file() {
            return Err(Error::Verify(format!(
                "{}: the {label} program is missing (rebuild them with --prebuild)",
                p.display()
            )));
        }
    }
    let (work, _tmp) = work_dir(plan.keep)?;
    let mut run = |(label, program): &(&str, PathBuf)| {
        run_and_measure(
            runner,
            (plan.run, plan.ignore),
            program,
            &work,
            label,
            plan.stop,
        )
    };
    let [before, after] = &programs;
    let before = run(before)?;
    let after = run(after)?;
    Ok(verified(
        plan,
        &format!("prebuilt: {}", pre.build),
        before,
        after,
    ))
}

impl<'a> VerifyPlan<'a> {
    /// Every file the patch changes, the first one first.
    fn files(&self) -> impl Iterator<Item = PatchedFile<'a>> + '_ {
        let first = PatchedFile {
            source: self.source,
            source_text: self.source_text,
            patched_text: self.patched_text,
        };
        std::iter::once(first).chain(self.also.iter().copied())
    }
}

/// Several patched files are built only from copies in `{dir}`.
fn needs_dir(plan: &VerifyPlan<'_>) -> Result<(), Error> {
    if plan.also.is_empty() || plan.build.contains("{dir}") {
        return Ok(());
    }
    let names: Vec<String> = plan.files().map(|f| file_name(f.source)).collect();
    Err(Error::Verify(format!(
        "the patch changes {} files ({}): the build command must build their copies in {{dir}} (`cc {} -o {{out}}`)",
        names.len(),
        names.join(", "),
        names
            .iter()
            .map(|n| format!("{{dir}}/{n}"))
            .collect::<Vec<_>>()
            .join(" ")
    )))
}

fn create_dir(d: &Path) -> Result<(), Error> {
    std::fs::create_dir_all(d).map_err(io(format!("cannot create {}", d.display())))
}

/// Where the builds and runs go: `keep` (made if missing), else a
/// temporary directory, removed when the second value is dropped.
fn work_dir(keep: Option<&Path>) -> Result<(PathBuf, Option<tempfile::TempDir>), Error> {
    match keep {
        Some(d) => {
            create_dir(d)?;
            Ok((d.to_path_buf(), None))
        }
        None => {
            let tmp = temp_dir()?;
            Ok((tmp.path().to_path_buf(), Some(tmp)))
        }
    }
}

fn temp_dir() -> Result<tempfile::TempDir, Error> {
    tempfile::Builder::new()
        .prefix("accprof-verify-")
        .tempdir()
        .map_err(io("cannot create a temporary directory".to_string()))
}

/// What each version is built from: its build command (`{dir}` filled
/// in) and its source, the copies written; a patched copy written beside
/// the original is removed when this is dropped.
struct Versions {
    before: (String, PathBuf),
    after: (String, PathBuf),
    _remove: Remove,
}

impl Versions {
    /// Writes the copies the two builds of `plan` read into `work` (see
    /// [`verify`]).
    fn write(plan: &VerifyPlan<'_>, work: &Path) -> Result<Versions, Error> {
        if !plan.also.is_empty() || plan.build.contains("{dir}") {
            return Self::in_dirs(plan, work);
        }
        let name = |middle: &str| {
            let stem = plan
                .source
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            match plan.source.extension() {
                Some(e) => format!("{stem}.{middle}.{}", e.to_string_lossy()),
                None => format!("{stem}.{middle}"),
            }
        };
        let next_to_source = has_local_includes(plan.source_text);
        let copy = if next_to_source {
            plan.source
                .with_file_name(name(&format!("accprof-verify-{}", std::process::id())))
        } else {
            work.join(name("accprof"))
        };
        std::fs::write(&copy, plan.patched_text)
            .map_err(io(format!("cannot write {}", copy.display())))?;
        Ok(Versions {
            before: (plan.build.to_string(), plan.source.to_path_buf()),
            after: (plan.build.to_string(), copy.clone()),
            _remove: Remove(next_to_source.then_some(copy)),
        })
    }

    /// Both versions built from their own directory of copies.
    fn in_dirs(plan: &VerifyPlan<'_>, work: &Path) -> Result<Versions, Error> {
        let files: Vec<PatchedFile<'_>> = plan.files().collect();
        for (i, f) in files.iter().enumerate() {
            if let Some(g) = files[..i]
                .iter()
                .find(|g| g.source.file_name() == f.source.file_name())
            {
                return Err(Error::Verify(format!(
                    "the patch changes {} and {}: one name, so {{dir}} cannot hold copies of both",
                    g.source.display(),
                    f.source.display()
                )));
            }
        }
        let version = |label: &str, patched: bool| -> Result<(String, PathBuf), Error> {
            let dir = work.join(label);
            let texts: Vec<(&Path, &str)> = files
                .iter()
                .map(|f| {
                    let text = if patched {
                        f.patched_text
                    } else {
                        f.source_text
                    };
                    (f.source, text)
                })
                .collect();
            let src = write_copies(&dir, &texts)?;
            let template = plan.build.replace("{dir}", &command::sh_quote(&dir));
            Ok((template, src))
        };
        Ok(Versions {
            before: version("before", false)?,
            after: version("after", true)?,
            _remove: Remove(None),
        })
    }

    /// (label, build command, source) of each version, the original first.
    fn each(&self) -> [(&'static str, &str, &Path); 2] {
        [
            ("before", self.before.0.as_str(), self.before.1.as_path()),
            ("after", self.after.0.as_str(), self.after.1.as_path()),
        ]
    }
}

/// The result of `plan`, its two versions measured; `build` is what
/// built them.
fn verified(plan: &VerifyPlan<'_>, build: &str, before: Measured, after: Measured) -> Verified {
    Verified {
        source: plan.source.to_path_buf(),
        also: plan.also.iter().map(|f| f.source.to_path_buf()).collect(),
        patch: plan.patch.clone(),
        build: build.to_string(),
        run: plan.run.to_string(),
        ignored: ignored(plan.ignore),
        differences: differences(&before, &after),
        before,
        after,
        kept: plan.keep.map(Path::to_path_buf),
    }
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| p.display().to_string())
}

/// Writes `files` (source, text to write) into `dir` under their own
/// names, and beside them the files they include with quotes, found
/// relative to each includer (names that leave the directory, or files
/// not found, are left to the build command's own flags). Returns the
/// copy of the first file.
fn write_copies(dir: &Path, files: &[(&Path, &str)]) -> Result<PathBuf, Error> {
    std::fs::create_dir_all(dir).map_err(io(format!("cannot create {}", dir.display())))?;
    // (where it was found, where its copy goes, its text) still to scan.
    let mut pending: Vec<(PathBuf, PathBuf, String)> = Vec::new();
    let mut first = None;
    let mut written = std::collections::HashSet::new();
    for (source, text) in files {
        let copy = dir.join(file_name(source));
        std::fs::write(&copy, text).map_err(io(format!("cannot write {}", copy.display())))?;
        first.get_or_insert_with(|| copy.clone());
        written.insert(copy.clone());
        pending.push((source.to_path_buf(), copy, text.to_string()));
    }
    while let Some((from, to, text)) = pending.pop() {
        for name in local_includes(&text) {
            let rel = Path::new(name);
            let inside = !name.is_empty()
                && rel
                    .components()
                    .all(|c| matches!(c, std::path::Component::Normal(_)));
            if !inside {
                continue;
            }
            let (Some(from_dir), Some(to_dir)) = (from.parent(), to.parent()) else {
                continue;
            };
            let (src, dst) = (from_dir.join(rel), to_dir.join(rel));
            if written.contains(&dst) {
                continue;
            }
            let Ok(included) = std::fs::read_to_string(&src) else {
                continue;
            };
            if let Some(parent) = dst.parent() {
                std::fs::create_dir_all(parent)
                    .map_err(io(format!("cannot create {}", parent.display())))?;
            }
            std::fs::write(&dst, &included)
                .map_err(io(format!("cannot write {}", dst.display())))?;
            written.insert(dst.clone());
            pending.push((src, dst, included));
        }
    }
    Ok(first.unwrap_or_else(|| dir.to_path_buf()))
}

fn differences(a: &Measured, b: &Measured) -> Vec<Difference> {
    let mut out = Vec::new();
    let mut differing = a
        .lines
        .iter()
        .zip(&b.lines)
        .enumerate()
        .filter(|(_, (x, y))| x != y);
    if let Some((i, (x, y))) = differing.next() {
        out.push(Difference::Line {
            number: i + 1,
            before: x.clone(),
            after: y.clone(),
            others: differing.count(),
        });
    }
    if a.lines.len() != b.lines.len() {
        out.push(Difference::LineCount {
            before: a.lines.len(),
            after: b.lines.len(),
        });
    }
    if a.code != b.code {
        out.push(Difference::ExitCode {
            before: a.code,
            after: b.code,
        });
    }
    out
}

/// Stops before the next build or run when a signal asked.
fn stopped(stop: Option<&AtomicBool>, label: &str) -> Result<(), Error> {
    if stop.is_some_and(|s| s.load(Ordering::SeqCst)) {
        return Err(Error::VerifyInterrupted {
            label: label.to_string(),
        });
    }
    Ok(())
}

/// Builds `source` with the `build` template into `program`.
fn build<R: Runner + ?Sized>(
    runner: &mut R,
    build: &str,
    source: &Path,
    program: &Path,
    label: &str,
    stop: Option<&AtomicBool>,
) -> Result<(), Error> {
    stopped(stop, label)?;
    let built = runner.build(build, source, program)?;
    stopped(stop, label)?;
    if !built.success {
        return Err(Error::Build {
            label: label.to_string(),
            command: built.command,
            code: built.code,
            stderr_tail: stderr_tail(&built.stderr),
            said: first_error(&built.stderr).map(String::into_boxed_str),
            log: None,
        });
    }
    Ok(())
}

/// The numbers of one run, from the analyzer's summary of its trace:
/// `program` run with the `run` template under the collector into
/// WORK/LABEL.trace.
fn run_and_measure<R: Runner + ?Sized>(
    runner: &mut R,
    (run, ignore): (&str, &[String]),
    program: &Path,
    work: &Path,
    label: &str,
    stop: Option<&AtomicBool>,
) -> Result<Measured, Error> {
    stopped(stop, label)?;
    let words = command::run_words(run, program)?;
    let trace = work.join(format!("{label}.trace"));
    let _ = std::fs::remove_file(&trace);
    let out = runner.run(&words, &trace, &[])?;
    // What it printed, whole, beside its trace (`--keep` keeps both).
    let printed = work.join(format!("{label}.out"));
    std::fs::write(&printed, &out.stdout)
        .map_err(io(format!("cannot write {}", printed.display())))?;
    stopped(stop, label)?;
    measure(label, out, ignore)
}

fn measure(label: &str, out: RunOutput, ignore: &[String]) -> Result<Measured, Error> {
    if !out.trace.is_file() {
        return Err(Error::NoTrace {
            label: label.to_string(),
            trace: out.trace,
            code: out.code,
            stderr_tail: stderr_tail(&out.stderr),
        });
    }
    let run = accprof_analyzer::load_run(&out.trace)?;
    let summary = run.summary().clone();
    let device = if summary.cupti {
        Ok(DeviceTimes {
            transfer_ns: summary.transfer_ns,
            transfers: summary.transfers,
            transfer_bytes: summary.transfer_bytes,
            kernel_ns: summary.kernel_ns,
        })
    } else {
        Err(NotMeasured {
            no_cupti: match &run.process.header.sources.cupti {
                SourceState::Inactive(why) => why.clone(),
                SourceState::Active => String::new(),
            },
            host_fallback: summary.host_fallback,
        })
    };
    Ok(Measured {
        code: out.code,
        wall_ns: out.wall_ns,
        lines: compared_lines(&out.stdout, ignore),
        trace: out.trace,
        device,
        constructs: summary.constructs,
        summary: Some(summary),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::{MockProgram, MockRunner};

    /// Traces recorded on an H200 (CUPTI active): the laplace sample
    /// before and after its data-region fix.
    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../cli/tests/fixtures/h200")
            .join(format!("{name}.trace"))
    }

    const ORIGINAL: &str = "int main(void) { return 0; }\n";
    const PATCHED: &str = "int main(void) { /* patched */ return 0; }\n";

    struct Setup {
        dir: tempfile::TempDir,
        source: PathBuf,
    }

    fn setup(text: &str) -> Setup {
        let dir = tempfile::tempdir().expect("temp dir");
        let source = dir.path().join("prog.c");
        std::fs::write(&source, text).expect("source");
        Setup { dir, source }
    }

    fn plan<'a>(s: &'a Setup, text: &'a str, keep: Option<&'a Path>) -> VerifyPlan<'a> {
        VerifyPlan {
            source: &s.source,
            source_text: text,
            patched_text: PATCHED,
            patch: "#1 L3".to_string(),
            also: Vec::new(),
            build: "gcc {src} -o {out}",
            run: "{out} 64 10",
            ignore: &[],
            keep,
            stop: None,
        }
    }

    fn device(m: &Measured) -> DeviceTimes {
        match &m.device {
            Ok(d) => *d,
            Err(e) => panic!("no device times: {e:?}"),
        }
    }

    fn summary_of(name: &str) -> accprof_analyzer::summary::Summary {
        let run = accprof_analyzer::load_run(&fixture(name)).expect("fixture loads");
        run.summary().clone()
    }

    #[test]
    fn same_output_is_ok_with_the_numbers_of_both_traces() {
        let s = setup(ORIGINAL);
        let keep = s.dir.path().join("kept");
        let mut runner = MockRunner::new(vec![
            MockProgram::new(
                "iter 10\ntime: 2.5 s\nerror 0.01\n",
                &fixture("laplace_bad_c"),
            ),
            MockProgram {
                wall_ns: 400_000,
                ..MockProgram::new(
                    "iter 10\ntime: 0.1 s\nerror 0.01\n",
                    &fixture("laplace_good_c"),
                )
            },
        ]);
        let v = verify(&mut runner, &plan(&s, ORIGINAL, Some(&keep))).expect("verifies");
        assert!(v.ok() && v.same_output(), "{:?}", v.differences);
        assert_eq!(v.before.lines, ["iter 10", "error 0.01"]);
        assert_eq!((v.before.wall_ns, v.after.wall_ns), (1_000_000, 400_000));

        // The original was built first, then a copy holding the patched text.
        assert_eq!(runner.builds.len(), 2);
        assert_eq!(runner.builds[0].src, s.source);
        assert_eq!(runner.builds[0].text, ORIGINAL);
        assert_eq!(runner.builds[1].text, PATCHED);
        assert_eq!(runner.builds[1].src, keep.join("prog.accprof.c"));
        assert!(
            runner.builds[0].command.starts_with("gcc ")
                && runner.builds[0]
                    .command
                    .contains(&s.source.display().to_string())
        );
        // Each run ran the program its build made, with the run arguments.
        for (run, build) in runner.runs.iter().zip(&runner.builds) {
            assert_eq!(run[0], build.out.display().to_string());
            assert_eq!(run[1..], ["64", "10"]);
        }
        assert!(keep.join("before.trace").is_file() && keep.join("after.trace").is_file());
        assert!(keep.join("prog.accprof.c").is_file(), "the kept copy stays");

        // The numbers are the analyzer's, trace by trace.
        for (m, name) in [(&v.before, "laplace_bad_c"), (&v.after, "laplace_good_c")] {
            let sum = summary_of(name);
            let d = device(m);
            assert_eq!(
                (d.transfer_ns, d.transfers, d.transfer_bytes, d.kernel_ns),
                (
                    sum.transfer_ns,
                    sum.transfers,
                    sum.transfer_bytes,
                    sum.kernel_ns
                ),
                "{name}"
            );
            assert_eq!(m.constructs, sum.constructs, "{name}");
        }
        // The fix keeps the arrays on the device: far fewer bytes move.
        let (b, a) = (device(&v.before), device(&v.after));
        assert!(b.transfers > 0 && b.kernel_ns > 0, "{b:?}");
        assert!(a.transfer_bytes < b.transfer_bytes, "{a:?} vs {b:?}");
        assert!(a.transfer_ns < b.transfer_ns, "{a:?} vs {b:?}");
    }

    #[test]
    fn different_output_names_what_differed() {
        let s = setup(ORIGINAL);
        let t = fixture("laplace_bad_c");
        let mut runner = MockRunner::new(vec![
            MockProgram::new("iter 10\nerror 0.01\nsum 5\nok\n", &t),
            MockProgram {
                code: 3,
                ..MockProgram::new("iter 10\nerror 0.02\nsum 6\n", &t)
            },
        ]);
        let v = verify(&mut runner, &plan(&s, ORIGINAL, None)).expect("verifies");
        assert!(!v.ok() && !v.same_output());
        assert_eq!(
            v.differences,
            [
                Difference::Line {
                    number: 2,
                    before: "error 0.01".to_string(),
                    after: "error 0.02".to_string(),
                    others: 1,
                },
                Difference::LineCount {
                    before: 4,
                    after: 3
                },
                Difference::ExitCode {
                    before: 0,
                    after: 3
                },
            ]
        );
        // Same stdout, another exit code: the output is the same, the run is not.
        let mut runner = MockRunner::new(vec![
            MockProgram::new("x\n", &t),
            MockProgram {
                code: 1,
                ..MockProgram::new("x\n", &t)
            },
        ]);
        let v = verify(&mut runner, &plan(&s, ORIGINAL, None)).expect("verifies");
        assert!(v.same_output() && !v.ok());
    }

    #[test]
    fn a_failing_build_names_its_command_and_stderr() {
        let s = setup(ORIGINAL);
        let mut runner = MockRunner::new(vec![
            MockProgram::new("x\n", &fixture("laplace_bad_c")),
            MockProgram {
                build_code: 1,
                build_stderr: "prog.c: In function 'main':\nprog.c:1:20: error: expected ';' before 'return'\n".to_string(),
                ..MockProgram::default()
            },
        ]);
        let err = match verify(&mut runner, &plan(&s, ORIGINAL, None)) {
            Ok(v) => panic!("a failed build verified: {v:?}"),
            Err(e) => e,
        };
        let Error::Build {
            label,
            command,
            code,
            stderr_tail,
            ..
        } = &err
        else {
            panic!("not a build error: {err}");
        };
        assert_eq!((label.as_str(), *code), ("after", 1));
        assert!(
            command.starts_with("gcc ") && command.contains("prog.accprof.c"),
            "{command}"
        );
        assert_eq!(stderr_tail.len(), 2);
        let msg = err.to_string();
        assert!(msg.contains(command.as_str()), "{msg}");
        assert!(
            msg.ends_with(": prog.c:1:20: error: expected ';' before 'return'"),
            "{msg}"
        );
        assert_eq!(msg.lines().count(), 1, "{msg}");
        // The patched version never ran.
        assert_eq!(runner.runs.len(), 1);
    }

    #[test]
    fn a_run_without_a_trace_is_an_error_naming_it() {
        let s = setup(ORIGINAL);
        let mut runner = MockRunner::new(vec![MockProgram {
            stderr: "Segmentation fault\n".to_string(),
            code: 139,
            trace: None,
            ..MockProgram::default()
        }]);
        let msg = match verify(&mut runner, &plan(&s, ORIGINAL, None)) {
            Ok(v) => panic!("verified without traces: {v:?}"),
            Err(e) => e.to_string(),
        };
        assert!(
            msg.starts_with("the before run left no trace at ")
                && msg.ends_with("before.trace (exit code 139): Segmentation fault"),
            "{msg}"
        );
    }

    #[test]
    fn a_source_with_local_includes_is_copied_next_to_it_then_removed() {
        let text = "#include \"consts.h\"\nint main(void) { return 0; }\n";
        let s = setup(text);
        let t = fixture("laplace_good_c");
        let mut runner = MockRunner::new(vec![
            MockProgram::new("x\n", &t),
            MockProgram::new("x\n", &t),
        ]);
        let v = verify(&mut runner, &plan(&s, text, None)).expect("verifies");
        assert!(v.ok());
        let copy = &runner.builds[1].src;
        assert_eq!(copy.parent(), s.source.parent());
        assert_eq!(runner.builds[1].text, PATCHED);
        assert!(!copy.exists(), "{} left behind", copy.display());
        assert_eq!(
            std::fs::read_to_string(&s.source).expect("source"),
            text,
            "the original is untouched"
        );
    }

    #[test]
    fn several_files_are_built_from_a_directory_of_copies() {
        let s = setup("#include \"prog.h\"\nint main(void) { return step(); }\n");
        let step = s.dir.path().join("step.c");
        let step_text = "#include \"prog.h\"\nint step(void) { return 0; }\n";
        std::fs::write(&step, step_text).expect("step");
        std::fs::write(s.dir.path().join("prog.h"), "#include \"sub/defs.h\"\n").expect("h");
        std::fs::create_dir(s.dir.path().join("sub")).expect("sub");
        std::fs::write(s.dir.path().join("sub/defs.h"), "#define N 4\n").expect("defs");
        let main_text = std::fs::read_to_string(&s.source).expect("main");
        let keep = s.dir.path().join("kept");
        let t = fixture("laplace_good_c");
        let mut runner = MockRunner::new(vec![
            MockProgram::new("x\n", &t),
            MockProgram::new("x\n", &t),
        ]);
        let plan = VerifyPlan {
            source: &s.source,
            source_text: &main_text,
            patched_text: PATCHED,
            patch: "#1 D6".to_string(),
            also: vec![PatchedFile {
                source: &step,
                source_text: step_text,
                patched_text: "#include \"prog.h\"\nint step(void) { /* patched */ return 0; }\n",
            }],
            build: "gcc {dir}/prog.c {dir}/step.c -o {out}",
            run: "{out}",
            ignore: &[],
            keep: Some(&keep),
            stop: None,
        };
        let v = verify(&mut runner, &plan).expect("verifies");
        assert!(v.ok());
        assert_eq!(v.also, std::slice::from_ref(&step));
        for (build, label) in runner.builds.iter().zip(["before", "after"]) {
            let d = keep.join(label);
            assert_eq!(build.src, d.join("prog.c"));
            assert_eq!(
                build.command,
                format!(
                    "gcc {0}/prog.c {0}/step.c -o {1}",
                    d.display(),
                    build.out.display()
                )
            );
            // The headers the copies include, nested ones too.
            assert!(d.join("prog.h").is_file() && d.join("sub/defs.h").is_file());
        }
        let read = |p: PathBuf| std::fs::read_to_string(p).expect("copy");
        assert_eq!(read(keep.join("before/prog.c")), main_text);
        assert_eq!(read(keep.join("before/step.c")), step_text);
        assert_eq!(read(keep.join("after/prog.c")), PATCHED);
        assert!(read(keep.join("after/step.c")).contains("patched"));
        assert_eq!(
            read(s.source.clone()),
            main_text,
            "the original is untouched"
        );

        // Without {dir} the patched copies would not be built.
        let plan = VerifyPlan {
            build: "gcc {src} -o {out}",
            ..plan
        };
        let msg = match verify(&mut MockRunner::new(Vec::new()), &plan) {
            Ok(v) => panic!("verified without {{dir}}: {v:?}"),
            Err(e) => e.to_string(),
        };
        assert_eq!(
            msg,
            "the patch changes 2 files (prog.c, step.c): the build command must build their copies in {dir} (`cc {dir}/prog.c {dir}/step.c -o {out}`)"
        );
    }

    #[test]
    fn one_file_with_dir_is_built_from_copies() {
        let s = setup(ORIGINAL);
        let t = fixture("laplace_good_c");
        let mut runner = MockRunner::new(vec![
            MockProgram::new("x\n", &t),
            MockProgram::new("x\n", &t),
        ]);
        let plan = VerifyPlan {
            build: "gcc {dir}/prog.c -o {out}",
            ..plan(&s, ORIGINAL, None)
        };
        let v = verify(&mut runner, &plan).expect("verifies");
        assert!(v.ok() && v.also.is_empty());
        assert_eq!(runner.builds[0].text, ORIGINAL);
        assert_eq!(runner.builds[1].text, PATCHED);
        for b in &runner.builds {
            assert!(!b.command.contains("{dir}"), "{}", b.command);
            assert!(
                b.command.contains(&b.src.display().to_string()),
                "{}",
                b.command
            );
            assert_ne!(b.src, s.source);
        }
    }

    #[test]
    fn prebuilt_programs_are_refused_for_another_source_or_patch() {
        let s = setup(ORIGINAL);
        let dir = s.dir.path().join("pre");
        let built = plan(&s, ORIGINAL, None);
        let pre = VerifyPrebuilt {
            patch: built.patch.clone(),
            files: VerifyPrebuilt::files_of(&built),
            build: built.build.to_string(),
            before: "before.bin".to_string(),
            after: "after.bin".to_string(),
        };
        assert!(pre.check(&dir, &built).is_ok());
        // The same texts found elsewhere (the other machine's copy).
        let elsewhere = s.dir.path().join("copy/prog.c");
        let moved = VerifyPlan {
            source: &elsewhere,
            ..built.clone()
        };
        assert!(pre.check(&dir, &moved).is_ok());
        let err = |p: &VerifyPlan<'_>| match pre.check(&dir, p) {
            Ok(()) => panic!("accepted: {p:?}"),
            Err(e) => e.to_string(),
        };
        let edited = "int main(void) { return 1; }\n";
        assert_eq!(
            err(&plan(&s, edited, None)),
            format!(
                "{}: built from another version of prog.c (rebuild them with --prebuild)",
                dir.display()
            )
        );
        let other_patch = VerifyPlan {
            patched_text: "int main(void) { /* other */ return 0; }\n",
            patch: "#1 D6".to_string(),
            ..built.clone()
        };
        assert_eq!(
            err(&other_patch),
            format!(
                "{}: built for another patch (#1 L3 of prog.c), not this one (#1 D6 of prog.c): rebuild them with --prebuild",
                dir.display()
            )
        );
        let step = s.dir.path().join("step.c");
        let more_files = VerifyPlan {
            also: vec![PatchedFile {
                source: &step,
                source_text: "",
                patched_text: "x",
            }],
            ..built.clone()
        };
        assert!(err(&more_files).contains("not this one (#1 L3 of prog.c, step.c)"));
    }

    #[test]
    fn outputs_ignore_timing() {
        assert_eq!(compared_lines(b"a\ntime: 1.0 s\nb\n", &[]), ["a", "b"]);
        let npb = [" Time in seconds".to_string(), "Mop/s".to_string()];
        assert_eq!(
            compared_lines(
                b" Verification = SUCCESSFUL\n Time in seconds = 4.19\n  Mop/s total = 6945.98\n time: 2\n",
                &npb
            ),
            [" Verification = SUCCESSFUL"]
        );
    }

    #[test]
    fn local_includes() {
        assert!(has_local_includes("#include \"a.h\"\nint x;"));
        assert!(has_local_includes("  include 'consts.inc'"));
        assert_eq!(
            super::local_includes("#include \"a.h\"\n# include <b.h>\n  INCLUDE 'c.inc'\n"),
            ["a.h", "c.inc"]
        );
        assert!(!has_local_includes("#include <stdio.h>"));
    }
}
