//! OpenACC API routines (`acc_copyin`, `acc_update_self`, `acc_wait`, ...)
//! called by a real program under the collector: each call is a construct
//! at its own source line with its routine's name, in the model and in
//! `accprof report`, and the program behaves as without the collector.
//! (Host fallback here: the routines do little, the interposer still sees
//! every call.)

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use accprof_analyzer::{load_run, ConstructClass, Run};
use support::*;

fn source() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs/api_routines.c")
}

fn fortran_source() -> PathBuf {
    source().with_extension("f90")
}

/// The calls the source marks (`api: NAME` or `api: NAME xN`, in a C or
/// Fortran comment): (line, routine) -> how many times the line calls it.
fn marked_calls(file: &Path) -> BTreeMap<(u32, String), u64> {
    let text = std::fs::read_to_string(file).expect("source readable");
    let mut calls = BTreeMap::new();
    for (i, l) in text.lines().enumerate() {
        let Some((_, mark)) = l.split_once("/* api: ").or_else(|| l.split_once("! api: ")) else {
            continue;
        };
        let mark = mark.trim_end_matches("*/").trim();
        let (name, times) = match mark.split_once(" x") {
            Some((n, t)) => (n, t.parse().expect("count after x")),
            None => (mark, 1),
        };
        calls.insert((i as u32 + 1, name.to_string()), times);
    }
    calls
}

/// The API routine calls of a run, all in `file`: (line, routine) -> calls.
fn api_calls(run: &Run, file: &Path) -> BTreeMap<(u32, String), u64> {
    let name = file.file_name().expect("file name").to_string_lossy();
    let mut calls = BTreeMap::new();
    for (_, c) in run.constructs() {
        let ConstructClass::ApiCall(r) = c.class else {
            continue;
        };
        let site = run.site(c.site);
        assert!(
            site.file.ends_with(&*name),
            "{} attributed to {}",
            run.routine(r),
            site.file
        );
        assert!(c.parent.is_none(), "an API call is a top-level construct");
        assert!(c.end_ns().is_some(), "{} has its end", run.routine(r));
        let line = site
            .line
            .unwrap_or_else(|| panic!("no line for {}", run.routine(r)));
        *calls.entry((line, run.routine(r).to_string())).or_default() += 1;
    }
    calls
}

fn plain_run(exe: &Path) -> Output {
    Command::new(exe)
        .env_remove("LD_PRELOAD")
        .output()
        .expect("program runs")
}

#[test]
fn each_call_is_a_construct_at_its_line_and_the_program_is_unchanged() {
    let exe = program("api_routines");
    let expected = marked_calls(&source());
    assert!(expected.len() >= 12, "marks found: {expected:?}");

    let plain = plain_run(&exe);
    assert_eq!(plain.status.code(), Some(3), "{}", stderr(&plain));

    let dir = tempfile::tempdir().expect("tempdir");
    let out = accprof_run(dir.path(), &["--no-summary"], &exe, &[]);
    assert_eq!(out.status.code(), plain.status.code(), "{}", stderr(&out));
    assert_eq!(stdout(&out), stdout(&plain));

    let t = traces(dir.path());
    assert_eq!(t.len(), 1, "{t:?}");
    let run = load_run(&t[0]).expect("trace loads");
    assert_eq!(api_calls(&run, &source()), expected);

    // The text summary: one "LINE: ROUTINE reached N time(s)" per call line.
    let report = Command::new(accprof())
        .arg("report")
        .arg(&t[0])
        .output()
        .expect("accprof report runs");
    assert!(report.status.success(), "{}", stderr(&report));
    let text = stdout(&report);
    for ((line, name), n) in &expected {
        let want = format!(
            "    {line}: {name} reached {n} time{}",
            if *n == 1 { "" } else { "s" }
        );
        assert!(text.lines().any(|l| l == want), "no `{want}` in\n{text}");
    }
    let listed = text.lines().filter(|l| l.contains(": acc_")).count();
    assert_eq!(listed, expected.len(), "{text}");
}

#[test]
fn results_are_the_same_with_the_library_preloaded_alone() {
    // The program prints what acc_copyin, acc_is_present and acc_malloc
    // return and whether acc_memcpy_to/from_device round-tripped the data.
    let exe = program("api_routines");
    let plain = plain_run(&exe);
    let dir = tempfile::tempdir().expect("tempdir");
    let out = support::preloaded(&exe, &dir.path().join("t-%p.trace"))
        .output()
        .expect("program runs");
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert_eq!(stdout(&out), stdout(&plain));
    assert!(
        stdout(&out).contains("memcpy round trip: same"),
        "{}",
        stdout(&out)
    );
    let t = traces(dir.path());
    assert_eq!(t.len(), 1, "{t:?}");
    let run = load_run(&t[0]).expect("trace loads");
    assert_eq!(api_calls(&run, &source()), marked_calls(&source()));
}

#[test]
fn a_program_without_an_openacc_runtime_is_unaffected() {
    let exe = program("plain");
    let plain = plain_run(&exe);
    let dir = tempfile::tempdir().expect("tempdir");
    let out = support::preloaded(&exe, &dir.path().join("t-%p.trace"))
        .output()
        .expect("program runs");
    assert_eq!(out.status.code(), Some(4));
    assert_eq!(out.status.code(), plain.status.code());
    assert_eq!(stdout(&out), stdout(&plain));
    for t in traces(dir.path()) {
        let run = load_run(&t).expect("trace loads");
        assert!(
            run.constructs().is_empty(),
            "{:?}",
            run.constructs().collect::<Vec<_>>()
        );
    }
}

#[test]
fn fortran_calls_through_the_runtimes_wrappers_are_found_at_their_lines() {
    let src = fortran_source();
    let exe = build_dir().join("programs").join("api_routines_f90");
    std::fs::create_dir_all(exe.parent().expect("dir")).expect("mkdir");
    let built = Command::new("gfortran")
        .args(["-g", "-O1", "-fopenacc"])
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .output()
        .expect("gfortran runs");
    assert!(built.status.success(), "{}", stderr(&built));
    let plain = plain_run(&exe);
    assert!(plain.status.success(), "{}", stderr(&plain));
    let dir = tempfile::tempdir().expect("tempdir");
    let out = accprof_run(dir.path(), &["--no-summary"], &exe, &[]);
    assert_eq!(out.status.code(), plain.status.code(), "{}", stderr(&out));
    assert_eq!(stdout(&out), stdout(&plain));
    let t = traces(dir.path());
    assert_eq!(t.len(), 1, "{t:?}");
    let run = load_run(&t[0]).expect("trace loads");
    let expected = marked_calls(&src);
    assert_eq!(expected.len(), 4, "{expected:?}");
    assert_eq!(api_calls(&run, &src), expected);
}

/// Compiles `src` (under cli/tests/programs) with gcc and `flags`.
fn gcc(src: &str, out: &str, flags: &[&str]) -> PathBuf {
    let dir = build_dir().join("programs");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let exe = dir.join(out);
    let built = Command::new("gcc")
        .args(["-g", "-O1"])
        .args(flags)
        .arg(source().with_file_name(src))
        .arg("-o")
        .arg(&exe)
        .output()
        .expect("gcc runs");
    assert!(built.status.success(), "{src}: {}", stderr(&built));
    exe
}

#[test]
fn a_library_opened_with_its_own_runtime_reaches_that_runtime() {
    // The program links no OpenACC runtime; the library it opens with
    // RTLD_LOCAL brings libgomp, visible from the library only. Its calls
    // bind to the preloaded collector first, which must find that libgomp.
    let lib = gcc(
        "api_lib.c",
        "libapi_lib.so",
        &["-fopenacc", "-shared", "-fPIC"],
    );
    let exe = gcc("api_dlopen.c", "api_dlopen", &["-ldl"]);
    let lib_arg = lib.to_string_lossy().into_owned();
    let plain = Command::new(&exe)
        .arg(&lib_arg)
        .env_remove("LD_PRELOAD")
        .output()
        .expect("program runs");
    assert_eq!(plain.status.code(), Some(5), "{}", stderr(&plain));

    let dir = tempfile::tempdir().expect("tempdir");
    let out = accprof_run(dir.path(), &["--no-summary"], &exe, &[&lib_arg]);
    assert_eq!(out.status.code(), plain.status.code(), "{}", stderr(&out));
    assert_eq!(stdout(&out), stdout(&plain));
    assert!(
        !stderr(&out).contains("made no OpenACC calls"),
        "{}",
        stderr(&out)
    );
    let t = traces(dir.path());
    assert_eq!(t.len(), 1, "{t:?}");
    let run = load_run(&t[0]).expect("trace loads");

    let lib_src = source().with_file_name("api_lib.c");
    let main_src = source().with_file_name("api_dlopen.c");
    let mut calls = BTreeMap::new();
    for (_, c) in run.constructs() {
        if let ConstructClass::ApiCall(r) = c.class {
            let site = run.site(c.site);
            let file = Path::new(&site.file).file_name().map(|f| f.to_owned());
            *calls
                .entry((file, site.line, run.routine(r).to_string()))
                .or_insert(0u64) += 1;
        }
    }
    let mut expected = BTreeMap::new();
    for (file, src) in [("api_lib.c", &lib_src), ("api_dlopen.c", &main_src)] {
        for ((line, name), n) in marked_calls(src) {
            expected.insert((Some(file.into()), Some(line), name), n);
        }
    }
    assert_eq!(calls, expected);

    // Only the probe before the library was opened found no runtime.
    let missing: Vec<&String> = run
        .process
        .diagnostics
        .iter()
        .map(|(_, m)| m)
        .filter(|m| m.contains("no loaded object defines it"))
        .collect();
    assert_eq!(missing.len(), 1, "{:?}", run.process.diagnostics);
    assert!(missing[0].starts_with("acc_wait_all "), "{missing:?}");
}
