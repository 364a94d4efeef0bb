//! Call chains: the collector keeps the application's callers above each
//! call site (from the unwind that found it) and the analyzer symbolizes
//! them, inlined functions included, so a construct in a function called
//! from a loop knows that loop's line. Host fallback: the runtime still
//! reports the constructs.

mod support;

use std::path::Path;

use accprof_analyzer::{load_run, ConstructClass, Run};
use support::*;

/// Runs a sample under the collector and loads its trace.
fn traced(dir: &Path, name: &str, args: &[&str]) -> Run {
    let trace = dir.join(format!("{name}.trace"));
    let out = preloaded(&samples().join(name), &trace)
        .args(args)
        .current_dir(dir)
        .output()
        .expect("sample runs");
    assert!(out.status.success(), "{name}: {}", stderr(&out));
    assert!(stdout(&out).contains("reference: match"), "{name}");
    load_run(&trace).unwrap_or_else(|e| panic!("{}: {e}", trace.display()))
}

/// (file name, function, line) of each frame above the sites of the
/// compute constructs at `line` of `file`, one list per distinct site.
fn chains(run: &Run, file: &str, line: u32) -> Vec<Vec<(String, String, u32)>> {
    let mut sites: Vec<_> = run
        .constructs()
        .filter(|(_, c)| c.class == ConstructClass::Compute)
        .map(|(_, c)| c.site)
        .filter(|&s| {
            let site = run.site(s);
            site.file.ends_with(file) && site.line == Some(line)
        })
        .collect();
    sites.sort();
    sites.dedup();
    sites
        .into_iter()
        .map(|s| {
            run.callers(s)
                .iter()
                .map(|f| {
                    let name = f.file.rsplit('/').next().unwrap_or(&f.file).to_string();
                    (name, f.function.clone(), f.line.unwrap_or(0))
                })
                .collect()
        })
        .collect()
}

fn has_frame(chain: &[(String, String, u32)], file: &str, function: &str, line: u32) -> bool {
    chain
        .iter()
        .any(|(f, func, l)| f == file && func == function && *l == line)
}

#[test]
fn a_construct_called_from_another_file_knows_its_callers_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = traced(dir.path(), "caller_files", &["16", "12", "3"]);
    let line = directive_lines(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../samples/caller_files_step.c"),
        &["parallel"],
    )[0];
    let chains = chains(&run, "caller_files_step.c", line);
    assert_eq!(chains.len(), 1, "one call site: {chains:?}");
    // heat_step is called from main at two lines; the site's chain is the
    // one the first call saw.
    let c = &chains[0];
    assert_eq!(
        c.first().map(|f| (f.0.as_str(), f.1.as_str())),
        Some(("caller_files.c", "main")),
        "{c:?}"
    );
    assert!(has_frame(c, "caller_files.c", "main", 111), "{c:?}");
}

#[test]
fn inlined_callers_count_as_frames() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = traced(dir.path(), "caller_loop", &["16", "12", "3"]);
    let chains = chains(&run, "caller_loop.c", 78);
    assert!(!chains.is_empty(), "no site at line 78");
    // Whether GCC inlined heat_step and advance or not, each site's frames
    // lead through advance (line 93 or 94) to main's call at line 135.
    for c in &chains {
        assert!(
            has_frame(c, "caller_loop.c", "advance", 93)
                || has_frame(c, "caller_loop.c", "advance", 94),
            "{c:?}"
        );
        assert!(has_frame(c, "caller_loop.c", "main", 135), "{c:?}");
    }
}

#[test]
fn fortran_callers_are_found_too() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = traced(dir.path(), "caller_loop_f90", &["16", "12", "3"]);
    let chains = chains(&run, "caller_loop.f90", 37);
    assert!(!chains.is_empty(), "no site at line 37");
    for c in &chains {
        assert!(
            c.iter()
                .any(|(f, _, l)| f == "caller_loop.f90" && (*l == 77 || *l == 78)),
            "{c:?}"
        );
    }
}
