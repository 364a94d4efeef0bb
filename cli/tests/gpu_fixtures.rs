//! The collector's record of real GPU runs: traces recorded on an NVIDIA
//! H200 (CUDA 13.0, CUPTI 13.0, GCC 12 nvptx offload) by
//! tests/fixtures/record.sh, read back and checked against what the
//! programs do. Source lines come from the binaries in
//! tests/fixtures/h200/bin only, so the tests read the same on every machine.

mod support;

use std::path::Path;

use accprof_analyzer::{ConstructClass, Run};
use accprof_trace::CopyKind;

fn fixture(name: &str) -> Run {
    support::h200_fixture(name)
}

fn line_of(run: &Run, c: accprof_analyzer::ConstructId) -> (String, Option<u32>) {
    let s = run.site(run.construct(run.top_level(c)).site);
    let file = Path::new(&s.file)
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    (file, s.line)
}

/// laplace_bad.c ran 20 iterations (record.sh: N=256, ITERS=20, TOL=0).
/// Each iteration runs two `kernels` regions (lines 148 and 154); each
/// region copies both global arrays A and Anew in and out implicitly, each
/// 8*(LAPLACE_NMAX+2)^2 bytes with LAPLACE_NMAX=1024, whatever N is.
#[test]
fn laplace_bad_c_every_kernel_and_copy_is_recorded_and_attributed() {
    const ITERS: usize = 20;
    const ARRAY: u64 = 8 * 1026 * 1026;
    let run = fixture("laplace_bad_c");
    assert!(run.cupti_active(), "{:?}", run.header.sources);
    assert!(run.losses.is_empty());
    assert!(
        run.dropped.iter().all(|(_, n)| *n == 0),
        "{:?}",
        run.dropped
    );
    assert_eq!(run.devices.len(), 1);
    assert!(run.devices[0].name.contains("H200"), "{:?}", run.devices);

    // Kernels: one per compute region, all device-timed, all joined.
    assert_eq!(run.kernels.len(), 2 * ITERS);
    for k in &run.kernels {
        let c = k.construct.expect("kernel joined to its construct");
        assert_eq!(
            line_of(&run, c),
            ("laplace_bad.c".into(), Some(k_line(&run, k)))
        );
        assert!(k.end_ns > k.start_ns);
        assert!(k.grid.iter().all(|&g| g >= 1) && k.block[0] >= 32);
    }
    let at = |line: u32| {
        run.kernels
            .iter()
            .filter(|k| line_of(&run, k.construct.expect("joined")).1 == Some(line))
            .collect::<Vec<_>>()
    };
    assert_eq!(at(148).len(), ITERS);
    assert_eq!(at(154).len(), ITERS);
    // GCC 12 could not parallelize the fmax loop: it runs on one gang.
    assert!(at(154).iter().all(|k| k.grid == [1, 1, 1]));
    assert!(at(148).iter().all(|k| k.grid[0] > 1));

    // Copies: libgomp reports none of the array copies through acc_prof;
    // CUPTI sees them all, each joined to its region's line.
    let big: Vec<_> = run.copies.iter().filter(|c| c.bytes == ARRAY).collect();
    let up = big
        .iter()
        .filter(|c| c.kind == CopyKind::HostToDevice)
        .count();
    let down = big
        .iter()
        .filter(|c| c.kind == CopyKind::DeviceToHost)
        .count();
    assert_eq!(
        (up, down),
        (4 * ITERS, 4 * ITERS),
        "2 arrays x 2 regions per iteration"
    );
    for c in &run.copies {
        let owner = c.construct.expect("every copy joined to its construct");
        let (file, line) = line_of(&run, owner);
        assert_eq!(file, "laplace_bad.c");
        assert!(matches!(line, Some(148) | Some(154)), "{line:?}");
        assert!(c.end_ns > c.start_ns, "device-timed");
    }
    for line in [148, 154] {
        let n = big
            .iter()
            .filter(|c| line_of(&run, c.construct.expect("joined")).1 == Some(line))
            .count();
        assert_eq!(n, 4 * ITERS, "line {line}");
    }
}

fn k_line(run: &Run, k: &accprof_analyzer::Kernel) -> u32 {
    line_of(run, k.construct.expect("joined")).1.expect("line")
}

/// Every kernel and every copy of every GPU fixture is joined to the
/// construct that caused it, and every compute construct has a source line.
#[test]
fn all_fixtures_join_completely() {
    for name in [
        "laplace_bad_c",
        "laplace_good_c",
        "laplace_bad_f90",
        "laplace_good_f90",
        "heat2d_naive",
        "heat2d_data",
        "jacobi_f90",
        "launch_storm",
    ] {
        let run = fixture(name);
        assert!(run.cupti_active(), "{name}");
        assert!(!run.kernels.is_empty(), "{name}");
        assert!(
            run.kernels.iter().all(|k| k.construct.is_some()),
            "{name}: kernels"
        );
        assert!(
            run.copies.iter().all(|c| c.construct.is_some()),
            "{name}: copies"
        );
        for c in run
            .constructs
            .iter()
            .filter(|c| c.class == ConstructClass::Compute)
        {
            assert!(
                run.site(c.site).line.is_some(),
                "{name}: compute construct without a line"
            );
        }
    }
}

/// heat2d_naive (record.sh: 256 x 256, 20 steps): one compute construct per
/// step with copyin(u) and copyout(unew) of the whole grid.
#[test]
fn heat2d_naive_moves_the_grid_every_step() {
    let run = fixture("heat2d_naive");
    let grid = 8 * 256 * 256;
    let up = run
        .copies
        .iter()
        .filter(|c| c.kind == CopyKind::HostToDevice && c.bytes == grid)
        .count();
    let down = run
        .copies
        .iter()
        .filter(|c| c.kind == CopyKind::DeviceToHost && c.bytes == grid)
        .count();
    assert_eq!(run.kernels.len(), 20);
    assert_eq!((up, down), (20, 20));
}
