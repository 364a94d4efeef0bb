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
