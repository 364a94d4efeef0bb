//! What the views say about recorded runs: the names of the buffers, the
//! evidence of the coherence findings, `diff`, the merged report of several
//! devices, the static timeline plot and the help texts. Each reads real
//! fixture traces (recorded on the GPU machines, with their binaries)
//! through the real binary.

mod support;

/// `accprof ARGS` on fixture `name` of folder `gpu`; stdout with its
/// wrapped lines read as one.
fn on(gpu: &str, name: &str, args: &[&str]) -> String {
    support::on_fixture(gpu, name, args)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// The `#N CODE` block of a text report.
fn finding<'a>(text: &'a str, code: &str) -> &'a str {
    let at = text
        .find(&format!(" {code} "))
        .unwrap_or_else(|| panic!("{code} in {text}"));
    let rest = &text[at..];
    let end = rest[1..].find(" #").map_or(rest.len(), |e| e + 1);
    &rest[..end]
}

#[test]
fn the_helpers_copy_clause_names_the_buffer_d6_moved() {
    let text = on("h200-ledger", "data_shapes_helper", &["analyze"]);
    let d6 = finding(&text, "D6");
    assert!(!d6.contains("a buffer of"), "{d6}");
    assert!(d6.contains("[a]"), "{d6}");
}

#[test]
fn an_update_of_one_array_names_its_transfers_whichever_buffer_it_pointed_to() {
    let text = on("h100", "mpi_halo_whole_np2.r0", &["analyze"]);
    let p1 = finding(&text, "P1");
    assert!(!p1.contains("buffers of"), "{p1}");
    assert!(p1.contains("mpi_halo_whole.c:156 main [u]"), "{p1}");
}

#[test]
fn the_data_regions_copy_names_both_arrays_in_the_transfers_and_the_allocations() {
    let csv = support::on_fixture(
        "h200-coherence",
        "coherence_norm_bad",
        &["export", "-f", "csv", "--what", "transfers"],
    );
    let at_83: Vec<&str> = csv
        .lines()
        .filter(|l| l.contains(",copyin,") && l.ends_with("coherence_norm.c,main,83"))
        .map(|l| l.split(',').nth(4).expect("variable"))
        .collect();
    assert_eq!(at_83, ["unew", "u"], "{csv}");
    let csv = support::on_fixture(
        "h200-coherence",
        "coherence_norm_bad",
        &["export", "-f", "csv", "--what", "allocations"],
    );
    let block = csv
        .lines()
        .find(|l| l.ends_with("coherence_norm.c,main,83"))
        .expect("the data region's block");
    assert_eq!(block.split(',').nth(3), Some("u+unew"), "{csv}");
}

#[test]
fn an_allocation_says_how_much_of_it_no_copied_array_fills() {
    // laplace_good's `data copy(A) create(Anew)`: one 16 MiB block, only
    // A copied into it.
    let csv = support::on_fixture(
        "h200",
        "laplace_good_c",
        &["export", "-f", "csv", "--what", "allocations"],
    );
    let block = csv
        .lines()
        .find(|l| l.ends_with("laplace_good.c,main,132"))
        .expect("the data region's block");
    assert_eq!(block.split(',').nth(3), Some("A+8.03 MiB more"), "{csv}");
}

#[test]
fn c1_gives_offsets_in_each_reads_own_range_and_says_what_its_count_counts() {
    // The program swaps u and unew: the 19 reads of the same row fall in
    // either buffer, 1.00 MiB into it.
    let text = on("h200-coherence", "mpi_halo_stale_np2.r0", &["analyze"]);
    let c1 = finding(&text, "C1");
    assert!(
        c1.contains("first offset read 1.00 MiB, last offset read 1.00 MiB"),
        "{c1}"
    );
    assert!(c1.contains("19 times (the same page each time"), "{c1}");
    assert!(!c1.contains("one per page"), "{c1}");
}

#[test]
fn c2_names_the_line_of_the_constructs_that_used_the_device_copy_once() {
    let text = on("h200-coherence", "lost_write_bad", &["analyze"]);
    let c2 = finding(&text, "C2");
    assert_eq!(c2.matches("at compute construct").count(), 1, "{c2}");
}

/// `accprof ARGS` in the repository's root, with no symbol path from the
/// environment.
fn in_repo(args: &[&str]) -> std::process::Output {
    std::process::Command::new(support::accprof())
        .args(args)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .env_remove("ACCPROF_SYMBOL_PATH")
        .env("ACCPROF_SYMBOLS_ONLY", "1")
        .output()
        .expect("accprof runs")
}

#[test]
fn diff_without_the_binaries_says_why_its_lines_are_unknown() {
    let o = in_repo(&[
        "diff",
        "cli/tests/fixtures/h200/laplace_bad_c.trace",
        "cli/tests/fixtures/h200/laplace_good_c.trace",
    ]);
    assert!(o.status.success(), "{}", support::stderr(&o));
    let text = support::stdout(&o);
    assert!(text.contains("laplace_bad:? -> laplace_good:?"), "{text}");
    assert!(
        text.contains("note: neither run has source lines (\"?\")")
            && text.contains("--symbols DIR"),
        "{text}"
    );
    let err = support::stderr(&o);
    assert!(
        err.contains("laplace_bad_c.trace: note:") && err.contains("cannot read the binary"),
        "{err}"
    );
}

#[test]
fn diff_gives_the_transfer_count_and_bytes_each_a_column() {
    let o = in_repo(&[
        "diff",
        "cli/tests/fixtures/h200/laplace_bad_c.trace",
        "cli/tests/fixtures/h200/laplace_good_c.trace",
    ]);
    let text = support::stdout(&o);
    let row = |label: &str| -> Vec<String> {
        let l = text
            .lines()
            .find(|l| l.trim_start().starts_with(label))
            .unwrap_or_else(|| panic!("{label} in {text}"));
        l.trim_start()[label.len()..]
            .split("  ")
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .map(str::to_string)
            .collect()
    };
    assert_eq!(row("transfers"), ["300", "102"], "{text}");
    assert_eq!(row("bytes moved"), ["1.25 GiB", "16.1 MiB"], "{text}");
}

#[test]
fn the_demos_diff_line_finds_the_source_lines() {
    let demo = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/demo.sh"))
        .expect("demo.sh");
    let line = demo
        .lines()
        .find(|l| l.trim_start().starts_with("compare=\"$accprof diff") && l.contains("$fixture"))
        .expect("the demo's diff of the fixture");
    let cmd = line
        .trim()
        .trim_start_matches("compare=\"$accprof ")
        .trim_end_matches('"')
        .replace("$fixture", "cli/tests/fixtures/h200/laplace_bad_c.trace");
    let args: Vec<&str> = cmd.split_whitespace().collect();
    let o = in_repo(&args);
    assert!(o.status.success(), "{cmd}: {}", support::stderr(&o));
    let text = support::stdout(&o);
    assert!(!text.contains(":?"), "{cmd}:\n{text}");
    assert!(
        text.contains("laplace_bad.c:154 -> laplace_good.c:142"),
        "{text}"
    );
}

#[test]
fn exports_description_names_every_format_and_table() {
    for args in [&["--help"][..], &["export", "--help"]] {
        let o = in_repo(args);
        let text = support::stdout(&o);
        let line = text
            .lines()
            .find(|l| l.contains("Tables as CSV or JSON"))
            .unwrap_or_else(|| panic!("{text}"));
        for word in ["ledger", "coherence", "Perfetto", "Chrome", "SVG", "PNG"] {
            assert!(line.contains(word), "{word}: {line}");
        }
    }
}

#[test]
fn the_readmes_run_synopsis_has_the_check() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"))
        .expect("README");
    let synopsis = readme
        .lines()
        .find(|l| l.starts_with("accprof run [--output"))
        .expect("run synopsis");
    assert!(synopsis.contains("[--check coherence]"), "{synopsis}");
}

#[test]
fn completions_leave_out_the_collectors_own_flag() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let o = in_repo(&["completions", shell]);
        assert!(o.status.success(), "{shell}");
        let script = support::stdout(&o);
        assert!(!script.contains("at-exit"), "{shell}:\n{script}");
        assert!(script.contains("extended"), "{shell}:\n{script}");
    }
}

#[test]
fn a_proposal_of_several_directives_lines_them_up() {
    let text = support::on_fixture("h100", "default_async_fail", &["analyze"]);
    let at = text.find("   directive: ").expect("directive");
    let mut lines = text[at..].lines();
    let first = lines.next().expect("first");
    let second = lines.next().expect("second");
    assert!(first.ends_with("async(1)"), "{first}");
    assert_eq!(
        second,
        format!("{}#pragma acc parallel loop async(2)", " ".repeat(14)),
        "{text}"
    );
}

#[test]
fn a_threaded_run_without_mpi_says_nothing_of_mpi() {
    let text = support::on_fixture("h200-coherence", "coherence_threads_omit", &["analyze"]);
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("host thread ") && l.contains("inside OpenACC"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(!line.contains("MPI"), "{line}");
    let text = on("h100", "mpi_halo_np2.r0", &["analyze"]);
    assert!(text.contains("MPI calls"), "{text}");
}

/// Rank 1 of the two-rank mpi_halo recording as if it had run on device 1
/// (`acc_set_device_num(rank % 2)` on a host of two GPUs): every record
/// that names a device re-encoded with device 1, the rest as recorded.
/// No two-GPU recording exists; this is the real rank's content with only
/// its device changed.
fn on_device_1(dir: &std::path::Path) -> std::path::PathBuf {
    use accprof_trace::Record;
    let fixtures = accprof_analyzer::testkit::fixtures::dir("h100");
    let t =
        accprof_trace::read_file(&fixtures.join("mpi_halo_np2.r1.trace")).expect("rank 1 reads");
    assert!(t.losses.is_empty());
    let out = dir.join("mpi_halo_np2.r1.dev1.trace");
    let file = std::fs::File::create(&out).expect("create");
    let mut w = accprof_trace::Writer::new(file, &t.header).expect("header");
    for mut r in t.records {
        match &mut r {
            Record::Device(d) => d.id = 1,
            Record::Acc(a) if a.device_number.is_some() => a.device_number = Some(1),
            Record::Kernel(k) => k.device = 1,
            Record::Memcpy(m) => m.device = 1,
            Record::Memset(m) => m.device = 1,
            _ => {}
        }
        w.write(&r).expect("write");
    }
    w.finish().expect("finish");
    out
}

#[test]
fn a_merged_report_names_every_device_its_lines_ran_on() {
    let dir = tempfile::tempdir().expect("tempdir");
    let r1 = on_device_1(dir.path());
    let fixtures = accprof_analyzer::testkit::fixtures::dir("h100");
    let r0 = fixtures.join("mpi_halo_np2.r0.trace");
    let report = |traces: &[&std::path::Path]| {
        let o = std::process::Command::new(support::accprof())
            .arg("report")
            .arg("--symbols")
            .arg(fixtures.join("bin"))
            .args(traces)
            .env_remove("ACCPROF_SYMBOL_PATH")
            .env("ACCPROF_SYMBOLS_ONLY", "1")
            .output()
            .expect("accprof runs");
        assert!(o.status.success(), "{}", support::stderr(&o));
        support::stdout(&o)
    };
    let devices = |text: &str| -> Vec<String> {
        text.lines()
            .filter_map(|l| l.split("devicenum=").nth(1))
            .map(str::to_string)
            .collect()
    };
    // Each rank alone says its own device.
    assert!(devices(&report(&[&r0])).iter().all(|d| d == "0"));
    let alone = devices(&report(&[&r1]));
    assert!(
        !alone.is_empty() && alone.iter().all(|d| d == "1"),
        "{alone:?}"
    );
    // Merged, the lines both ranks ran name both devices.
    let merged = report(&[&r0, &r1]);
    let both = devices(&merged);
    assert!(both.iter().any(|d| d == "0,1"), "{merged}");
    assert!(both.iter().all(|d| d == "0,1"), "{merged}");
}

/// The rectangles of an SVG: x, y, width, height, opacity, fill.
fn rects(svg: &str) -> Vec<(f64, f64, f64, f64, f64, String)> {
    let doc = roxmltree::Document::parse(svg).expect("SVG parses");
    let num = |n: roxmltree::Node, a: &str| -> f64 {
        n.attribute(a).and_then(|v| v.parse().ok()).unwrap_or(0.0)
    };
    doc.descendants()
        .filter(|n| n.has_tag_name("rect"))
        .map(|n| {
            (
                num(n, "x"),
                num(n, "y"),
                num(n, "width"),
                num(n, "height"),
                n.attribute("opacity")
                    .map_or(1.0, |v| v.parse().unwrap_or(1.0)),
                n.attribute("fill").unwrap_or("").to_string(),
            )
        })
        .collect()
}

#[test]
fn the_timeline_plot_shades_each_lane_by_how_busy_it_was_and_marks_the_start_up() {
    // small_kernels (the NPB BT/SP shape) on an H200: 191 ms of CUDA
    // start-up and code loading in a 429 ms run, then many small kernels
    // and copies: copies take 1% of that time.
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("timeline.svg");
    support::on_fixture(
        "h200-ledger",
        "small_kernels_16_100",
        &[
            "export",
            "-f",
            "svg",
            "--plot",
            "timeline",
            "-o",
            out.to_str().expect("utf-8"),
        ],
    );
    let svg = std::fs::read_to_string(&out).expect("svg");
    assert!(svg.contains("CUDA start-up and code loading"), "{svg}");
    let all = rects(&svg);
    // The start-up: one grey band over every lane, as long as the
    // ledger's start-up (191 ms of the 429 ms the axis spans).
    let band = all
        .iter()
        .find(|r| r.5 == "#E8E8E8")
        .expect("start-up band");
    // The axis runs from the band's left edge to the plot's right margin.
    let share = band.2 / (1200.0 - band.0 - 12.0);
    assert!(
        (0.40..0.50).contains(&share),
        "start-up spans {share} of the axis: {band:?}"
    );
    // Each lane: its rectangles' widths weighted by their shade.
    let lane = |fill: &str| -> (f64, f64) {
        let rs: Vec<_> = all.iter().filter(|r| r.5 == fill).collect();
        assert!(!rs.is_empty(), "{fill}");
        let width: f64 = rs.iter().map(|r| r.2).sum();
        let shade: f64 = rs.iter().map(|r| r.2 * r.4).sum::<f64>() / width;
        (width, shade)
    };
    let (_, copyin) = lane("#FF7F0E");
    let (_, device) = lane("#1F77B4");
    assert!(copyin < 0.35, "copies take 1% of the time, shaded {copyin}");
    assert!(
        device < 0.9 && device > copyin,
        "device shaded {device}, copies {copyin}"
    );
}
