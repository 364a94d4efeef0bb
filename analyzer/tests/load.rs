//! Loading with the parallel reader builds the same model as reading the
//! trace sequentially, intact or damaged, and the progress callback is told
//! every byte read.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use accprof_analyzer::symbolize::Symbolizer;
use accprof_analyzer::{builder, LoadOptions};

fn fixtures() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../cli/tests/fixtures");
    let mut out = Vec::new();
    for gpu in ["h100", "h200"] {
        let mut paths: Vec<PathBuf> = std::fs::read_dir(root.join(gpu))
            .expect("fixture directory")
            .map(|e| e.expect("directory entry").path())
            .filter(|p| p.extension().is_some_and(|e| e == "trace"))
            .collect();
        paths.sort();
        out.extend(paths);
    }
    out
}

fn bin_dir(trace: &Path) -> PathBuf {
    trace.parent().expect("fixture directory").join("bin")
}

/// The model built from a sequential reader, as loading did before it
/// read in parallel.
fn sequential(trace: &Path) -> String {
    let file = std::fs::File::open(trace).expect("opens");
    let reader = accprof_trace::Reader::new(std::io::BufReader::new(file))
        .expect("header reads")
        .with_resync(true);
    let mut symbolizer = Symbolizer::with_search_dirs(vec![bin_dir(trace)]);
    symbolizer.recorded_paths = false;
    let mut run = builder::build_from_reader(reader, &mut symbolizer);
    run.add_notes(std::mem::take(&mut symbolizer.notes));
    format!("{run:?}")
}

/// Loads `trace` with a progress callback; the model, and every value the
/// callback was given.
fn loaded(trace: &Path) -> (String, Vec<u64>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = Arc::clone(&seen);
    let mut opts = LoadOptions::only_in(vec![bin_dir(trace)]);
    opts.progress = Some(Arc::new(move |done| {
        s.lock().expect("not poisoned").push(done);
    }));
    let run = accprof_analyzer::load_run_with(trace, &opts).expect("loads");
    let seen = seen.lock().expect("not poisoned").clone();
    (format!("{run:?}"), seen)
}

#[test]
fn parallel_loading_builds_the_sequential_model_and_reports_every_byte() {
    let traces = fixtures();
    assert!(traces.len() >= 10);
    for t in &traces {
        let (run, seen) = loaded(t);
        assert_eq!(run, sequential(t), "{}", t.display());
        let size = std::fs::metadata(t).expect("size").len();
        assert_eq!(seen.last().copied(), Some(size), "{}", t.display());
        assert!(seen.windows(2).all(|w| w[0] <= w[1]), "{}", t.display());
    }
}

#[test]
fn damaged_traces_load_as_they_read_sequentially() {
    let dir = tempfile::tempdir().expect("tempdir");
    let calls = AtomicU64::new(0);
    for t in fixtures()
        .iter()
        .filter(|t| std::fs::metadata(t).expect("size").len() > 4096)
    {
        let bytes = std::fs::read(t).expect("reads");
        let name = t.file_name().expect("name").to_string_lossy().into_owned();
        let gpu = t.parent().expect("dir").file_name().expect("gpu");
        let sub = dir.path().join(gpu);
        std::fs::create_dir_all(&sub).expect("mkdir");
        // The binaries are found through the copy's own bin directory.
        let bin = sub.join("bin");
        if !bin.exists() {
            std::os::unix::fs::symlink(bin_dir(t), &bin).expect("symlink");
        }
        let cut = sub.join(format!("cut-{name}"));
        std::fs::write(&cut, &bytes[..bytes.len() * 2 / 3]).expect("writes");
        let mut flipped = bytes.clone();
        let at = bytes.len() / 2;
        flipped[at] ^= 0x40;
        let flip = sub.join(format!("flip-{name}"));
        std::fs::write(&flip, &flipped).expect("writes");
        for p in [&cut, &flip] {
            let (run, _) = loaded(p);
            assert_eq!(run, sequential(p), "{}", p.display());
            assert!(run.contains("Loss {"), "{}: no loss", p.display());
            calls.fetch_add(1, Ordering::Relaxed);
        }
    }
    assert!(calls.load(Ordering::Relaxed) >= 10);
}
