//! Source edits and unified diffs.
//!
//! Proposals carry line-based [`Edit`]s against the original file. Edits of
//! several findings on the same directive are merged (one finding turns
//! `kernels` into `parallel loop`, another adds `present(...)`), applied to
//! the text, and the result is compared with the original by a small Myers
//! diff to print a unified diff.

use std::collections::BTreeMap;

pub use crate::source::Edit;
use crate::source::SourceSet;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PatchError {
    #[error("source {0} was not read")]
    NoSource(String),
    #[error(
        "{file}:{line}: expected `{expected}`, found `{found}`: the source changed since the run"
    )]
    Mismatch {
        file: String,
        line: u32,
        expected: String,
        found: String,
    },
    #[error(
        "{file}:{line}: two proposals change this directive's construct differently ({a} / {b})"
    )]
    Conflict {
        file: String,
        line: u32,
        a: String,
        b: String,
    },
    #[error(
        "{file}:{line}: the directive continues over several lines; not rewritten automatically"
    )]
    Continued { file: String, line: u32 },
}

/// The patched text of each file and the unified diff of all of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Patched {
    /// (recorded path, new text), in path order.
    pub files: Vec<(String, String)>,
    pub diff: String,
}

/// Applies `edits` to the sources they name and renders the diff.
pub fn render(sources: &SourceSet, edits: &[Edit]) -> Result<Patched, PatchError> {
    let mut by_file: BTreeMap<&str, Vec<&Edit>> = BTreeMap::new();
    for e in edits {
        by_file.entry(e.file()).or_default().push(e);
    }
    let mut files = Vec::new();
    let mut diff = String::new();
    for (path, edits) in by_file {
        let src = sources
            .get(path)
            .ok_or_else(|| PatchError::NoSource(path.to_string()))?;
        let new = apply(path, &src.lines, src.lang, &edits)?;
        let old_text = src.lines.join("\n");
        let new_text = new.join("\n");
        let shown = display_path(&src.found_at.display().to_string());
        diff.push_str(&unified_diff(
            &format!("a/{shown}"),
            &format!("b/{shown}"),
            &old_text,
            &new_text,
            3,
        ));
        let mut text = new_text;
        if src.text.ends_with('\n') {
            text.push('\n');
        }
        files.push((path.to_string(), text));
    }
    Ok(Patched { files, diff })
}

/// The path in diff headers, as `patch -p1` and `git apply` read it:
/// relative to the current directory when the file is under it, else
/// relative to the top of the git work tree that holds it, else the
/// absolute path without its leading slash.
fn display_path(p: &str) -> String {
    let cwd = std::env::current_dir().ok();
    let path = match (std::path::Path::new(p), &cwd) {
        (rel, Some(cwd)) if rel.is_relative() => cwd.join(rel),
        (abs, _) => abs.to_path_buf(),
    };
    let path = path.canonicalize().unwrap_or(path);
    if let Some(cwd) = cwd.and_then(|c| c.canonicalize().ok()) {
        if let Ok(rel) = path.strip_prefix(&cwd) {
            return rel.display().to_string();
        }
    }
    let repo = path
        .ancestors()
        .skip(1)
        .find(|dir| dir.join(".git").exists());
    if let Some(rel) = repo.and_then(|r| path.strip_prefix(r).ok()) {
        return rel.display().to_string();
    }
    path.display()
        .to_string()
        .trim_start_matches('/')
        .to_string()
}

#[derive(Default)]
struct LinePlan {
    before: Vec<String>,
    after: Vec<String>,
    delete: bool,
    construct: Option<String>,
    remove: Vec<String>,
    add: Vec<String>,
    directive: bool,
    end_line: u32,
}

fn apply(
    path: &str,
    lines: &[String],
    lang: crate::source::Lang,
    edits: &[&Edit],
) -> Result<Vec<String>, PatchError> {
    let mut plan: BTreeMap<u32, LinePlan> = BTreeMap::new();
    let line_text = |n: u32| lines.get(n as usize - 1).map(String::as_str).unwrap_or("");
    for (k, e) in edits.iter().enumerate() {
        // Two findings that propose the same inserted lines at the same
        // place (L5 and R1 queueing one loop's constructs) insert them once.
        let inserts = matches!(e, Edit::InsertBefore { .. } | Edit::InsertAfter { .. });
        if inserts && edits[..k].contains(e) {
            continue;
        }
        let p = plan.entry(e.line()).or_default();
        match e {
            Edit::InsertBefore { lines: l, .. } => p.before.extend(l.iter().cloned()),
            Edit::InsertAfter { lines: l, .. } => p.after.extend(l.iter().cloned()),
            Edit::Delete { line, expect, .. } => {
                if line_text(*line).trim() != expect.trim() {
                    return Err(PatchError::Mismatch {
                        file: path.into(),
                        line: *line,
                        expected: expect.clone(),
                        found: line_text(*line).trim().into(),
                    });
                }
                p.delete = true;
            }
            Edit::Directive {
                line,
                end_line,
                original,
                construct,
                remove,
                add,
                ..
            } => {
                if line_text(*line).trim() != original.trim() {
                    return Err(PatchError::Mismatch {
                        file: path.into(),
                        line: *line,
                        expected: original.clone(),
                        found: line_text(*line).trim().into(),
                    });
                }
                if end_line != line {
                    return Err(PatchError::Continued {
                        file: path.into(),
                        line: *line,
                    });
                }
                if let Some(c) = construct {
                    if let Some(old) = &p.construct {
                        if old != c {
                            return Err(PatchError::Conflict {
                                file: path.into(),
                                line: *line,
                                a: old.clone(),
                                b: c.clone(),
                            });
                        }
                    }
                    p.construct = Some(c.clone());
                }
                for r in remove {
                    if !p.remove.contains(r) {
                        p.remove.push(r.clone());
                    }
                }
                for a in add {
                    if !p.add.contains(a) {
                        p.add.push(a.clone());
                    }
                }
                p.directive = true;
                p.end_line = *end_line;
            }
        }
    }
    let file = crate::source::SourceFile::new(path, path.into(), lang, lines.join("\n"));
    let mut out = Vec::with_capacity(lines.len() + 8);
    for (i, l) in lines.iter().enumerate() {
        let n = i as u32 + 1;
        let Some(p) = plan.get(&n) else {
            out.push(l.clone());
            continue;
        };
        out.extend(p.before.iter().cloned());
        if p.delete {
            // Nothing of the line stays.
        } else if p.directive {
            let d = file.directive_at(n).ok_or_else(|| PatchError::Mismatch {
                file: path.into(),
                line: n,
                expected: "an OpenACC directive".into(),
                found: l.trim().into(),
            })?;
            let construct = p.construct.clone().unwrap_or_else(|| d.construct_name());
            // The kept clauses in their order; the new ones where the first
            // removed clause was, or first when none is removed.
            let mut clauses: Vec<String> = Vec::new();
            let mut placed = false;
            if !d.clauses.iter().any(|c| p.remove.contains(&c.name)) {
                clauses.extend(p.add.iter().cloned());
                placed = true;
            }
            for c in &d.clauses {
                if p.remove.contains(&c.name) {
                    if !placed {
                        clauses.extend(p.add.iter().cloned());
                        placed = true;
                    }
                } else if !clauses.contains(&c.text()) {
                    clauses.push(c.text());
                }
            }
            out.push(d.render(&construct, &clauses));
        } else {
            out.push(l.clone());
        }
        out.extend(p.after.iter().cloned());
    }
    Ok(out)
}

/// A unified diff of two texts, line by line, with `context` lines around
/// each change. Empty when they are equal.
pub fn unified_diff(a_name: &str, b_name: &str, a: &str, b: &str, context: usize) -> String {
    let a: Vec<&str> = if a.is_empty() {
        Vec::new()
    } else {
        a.split('\n').collect()
    };
    let b: Vec<&str> = if b.is_empty() {
        Vec::new()
    } else {
        b.split('\n').collect()
    };
    let ops = myers(&a, &b);
    if ops.iter().all(|o| matches!(o, Op::Keep)) {
        return String::new();
    }
    // Positions of each op in a and b.
    let mut rows = Vec::with_capacity(ops.len());
    let (mut i, mut j) = (0usize, 0usize);
    for op in &ops {
        rows.push((*op, i, j));
        match op {
            Op::Keep => {
                i += 1;
                j += 1;
            }
            Op::Del => i += 1,
            Op::Ins => j += 1,
        }
    }
    let mut out = format!("--- {a_name}\n+++ {b_name}\n");
    let changed: Vec<usize> = rows
        .iter()
        .enumerate()
        .filter(|(_, r)| !matches!(r.0, Op::Keep))
        .map(|(k, _)| k)
        .collect();
    let mut k = 0;
    while k < changed.len() {
        let start = changed[k].saturating_sub(context);
        let mut end = changed[k];
        while k < changed.len() && changed[k] <= end + 2 * context + 1 {
            end = changed[k];
            k += 1;
        }
        let end = (end + context + 1).min(rows.len());
        let hunk = &rows[start..end];
        let a_start = hunk[0].1;
        let b_start = hunk[0].2;
        let a_len = hunk.iter().filter(|r| !matches!(r.0, Op::Ins)).count();
        let b_len = hunk.iter().filter(|r| !matches!(r.0, Op::Del)).count();
        let range = |s: usize, n: usize| match n {
            0 => format!("{s},0"),
            1 => format!("{}", s + 1),
            _ => format!("{},{n}", s + 1),
        };
        out.push_str(&format!(
            "@@ -{} +{} @@\n",
            range(a_start, a_len),
            range(b_start, b_len)
        ));
        for (op, i, j) in hunk {
            match op {
                Op::Keep => {
                    out.push(' ');
                    out.push_str(a[*i]);
                }
                Op::Del => {
                    out.push('-');
                    out.push_str(a[*i]);
                }
                Op::Ins => {
                    out.push('+');
                    out.push_str(b[*j]);
                }
            }
            out.push('\n');
        }
    }
    out
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Keep,
    Del,
    Ins,
}

/// Myers' O(ND) shortest edit script.
fn myers(a: &[&str], b: &[&str]) -> Vec<Op> {
    let n = a.len() as isize;
    let m = b.len() as isize;
    let max = (n + m) as usize;
    let off = max as isize + 1;
    let mut v = vec![0isize; 2 * max + 3];
    let mut trace: Vec<Vec<isize>> = Vec::new();
    'outer: for d in 0..=max as isize {
        trace.push(v.clone());
        let mut k = -d;
        while k <= d {
            let idx = (k + off) as usize;
            let mut x = if k == -d || (k != d && v[idx - 1] < v[idx + 1]) {
                v[idx + 1]
            } else {
                v[idx - 1] + 1
            };
            let mut y = x - k;
            while x < n && y < m && a[x as usize] == b[y as usize] {
                x += 1;
                y += 1;
            }
            v[idx] = x;
            if x >= n && y >= m {
                break 'outer;
            }
            k += 2;
        }
    }
    // Walk back through the saved frontiers.
    let mut ops = Vec::new();
    let (mut x, mut y) = (n, m);
    for d in (1..trace.len() as isize).rev() {
        let v = &trace[d as usize];
        let k = x - y;
        let idx = (k + off) as usize;
        let prev_k = if k == -d || (k != d && v[idx - 1] < v[idx + 1]) {
            k + 1
        } else {
            k - 1
        };
        let prev_x = v[(prev_k + off) as usize];
        let prev_y = prev_x - prev_k;
        while x > prev_x && y > prev_y {
            ops.push(Op::Keep);
            x -= 1;
            y -= 1;
        }
        if x == prev_x {
            ops.push(Op::Ins);
        } else {
            ops.push(Op::Del);
        }
        x = prev_x;
        y = prev_y;
    }
    while x > 0 && y > 0 {
        ops.push(Op::Keep);
        x -= 1;
        y -= 1;
    }
    ops.reverse();
    ops
}

#[cfg(test)]
mod tests {
    use super::*;

    fn apply_all(old: &str, new: &str) -> String {
        // Applying a diff by hand: check hunks reproduce `new` from `old`.
        let d = unified_diff("a", "b", old, new, 3);
        let a: Vec<&str> = old.split('\n').collect();
        let mut out: Vec<String> = Vec::new();
        let mut pos = 0usize;
        for line in d.lines().skip(2) {
            if let Some(h) = line.strip_prefix("@@ -") {
                let start: usize = h
                    .split([',', ' '])
                    .next()
                    .and_then(|s| s.parse().ok())
                    .expect("hunk start");
                let start = start.saturating_sub(1);
                let from = if h.split(' ').next().is_some_and(|r| r.ends_with(",0")) {
                    start + 1
                } else {
                    start
                };
                while pos < from {
                    out.push(a[pos].to_string());
                    pos += 1;
                }
            } else if let Some(l) = line.strip_prefix(' ') {
                out.push(l.to_string());
                pos += 1;
            } else if line.starts_with('-') {
                pos += 1;
            } else if let Some(l) = line.strip_prefix('+') {
                out.push(l.to_string());
            }
        }
        while pos < a.len() {
            out.push(a[pos].to_string());
            pos += 1;
        }
        out.join("\n")
    }

    #[test]
    fn the_same_lines_proposed_twice_at_one_place_are_inserted_once() {
        let set = SourceSet::with_text("w.c", "int main(void)\n{\n  return 0;\n}\n");
        let wait = Edit::InsertAfter {
            file: "w.c".into(),
            line: 2,
            lines: vec!["#pragma acc wait(1)".into()],
        };
        let other = Edit::InsertAfter {
            file: "w.c".into(),
            line: 2,
            lines: vec!["#pragma acc wait(2)".into()],
        };
        let p = render(&set, &[wait.clone(), other, wait]).expect("patch");
        assert_eq!(
            p.files[0].1,
            "int main(void)\n{\n#pragma acc wait(1)\n#pragma acc wait(2)\n  return 0;\n}\n"
        );
    }

    #[test]
    fn diff_of_equal_texts_is_empty() {
        assert_eq!(unified_diff("a", "b", "x\ny", "x\ny", 3), "");
    }

    #[test]
    fn diff_hunks_and_ranges() {
        let old = "1\n2\n3\n4\n5\n6\n7\n8\n9\n10";
        let new = "1\n2\n3\nnew\n4\n5\n6\n7\n8\n9 changed\n10";
        let d = unified_diff("a/f", "b/f", old, new, 1);
        assert_eq!(
            d,
            "--- a/f\n+++ b/f\n@@ -3,2 +3,3 @@\n 3\n+new\n 4\n@@ -8,3 +9,3 @@\n 8\n-9\n+9 changed\n 10\n"
        );
    }

    #[test]
    fn diffs_reproduce_the_new_text() {
        let cases = [
            ("a\nb\nc", "a\nc"),
            ("a\nb\nc", "x\na\nb\nc\ny"),
            ("", "a\nb"),
            ("a\nb", "b\na"),
            ("p\nq\nr\ns\nt\nu\nv\nw", "p\nQ\nr\ns\nt\nu\nV\nw\nz"),
        ];
        for (old, new) in cases {
            if old.is_empty() {
                continue;
            }
            assert_eq!(apply_all(old, new), new, "{old:?} -> {new:?}");
        }
    }

    #[test]
    fn edits_merge_on_one_directive() {
        let text = "int main(){\n#pragma acc kernels // k\nfor(;;){}\n}\n";
        let set = SourceSet::with_text("t.c", text);
        let edits = vec![
            Edit::Directive {
                file: "t.c".into(),
                line: 2,
                end_line: 2,
                original: "#pragma acc kernels // k".into(),
                construct: Some("parallel loop".into()),
                remove: vec![],
                add: vec!["reduction(max:dt)".into()],
            },
            Edit::Directive {
                file: "t.c".into(),
                line: 2,
                end_line: 2,
                original: "#pragma acc kernels // k".into(),
                construct: None,
                remove: vec![],
                add: vec!["present(A)".into()],
            },
            Edit::InsertBefore {
                file: "t.c".into(),
                line: 2,
                lines: vec!["// before".into()],
            },
        ];
        let p = render(&set, &edits).expect("patch");
        assert_eq!(
            p.files[0].1,
            "int main(){\n// before\n#pragma acc parallel loop reduction(max:dt) present(A) // k\nfor(;;){}\n}\n"
        );
        assert!(p
            .diff
            .contains("+#pragma acc parallel loop reduction(max:dt) present(A) // k"));
        assert!(p.diff.contains("-#pragma acc kernels // k"));
    }

    #[test]
    fn a_changed_source_is_refused() {
        let set = SourceSet::with_text("t.c", "a\nb\n");
        let e = Edit::Delete {
            file: "t.c".into(),
            line: 2,
            expect: "c".into(),
        };
        assert!(matches!(
            render(&set, &[e]),
            Err(PatchError::Mismatch { .. })
        ));
    }
}
