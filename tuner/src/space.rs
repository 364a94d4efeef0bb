//! What a sweep varies: the parameters (`vector_length`, `num_gangs`,
//! `num_workers`, a whole directive), their values, the configurations
//! they make, and how each one reaches the program: a clause patched into
//! the source, a macro passed with `-D`, or libgomp's `GOMP_OPENACC_DIM`
//! read at run time (no rebuild).

use std::fmt;

use accprof_analyzer::source::{Lang, SourceFile};

/// One tunable parameter of a compute construct.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Param {
    /// The construct itself with its clauses: `parallel loop collapse(2)
    /// reduction(max:dt)` in place of `kernels`.
    Directive,
    NumGangs,
    NumWorkers,
    VectorLength,
}

impl Param {
    pub const ALL: [Param; 4] = [
        Param::Directive,
        Param::NumGangs,
        Param::NumWorkers,
        Param::VectorLength,
    ];

    /// The name as written on the command line and in the clause.
    pub fn name(self) -> &'static str {
        match self {
            Param::Directive => "directive",
            Param::NumGangs => "num_gangs",
            Param::NumWorkers => "num_workers",
            Param::VectorLength => "vector_length",
        }
    }

    pub fn from_name(s: &str) -> Option<Param> {
        Param::ALL.into_iter().find(|p| p.name() == s)
    }

    /// Position in `GOMP_OPENACC_DIM=gang:worker:vector`.
    fn dim_index(self) -> Option<usize> {
        match self {
            Param::NumGangs => Some(0),
            Param::NumWorkers => Some(1),
            _ => None,
        }
    }
}

impl fmt::Display for Param {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How a parameter's values reach the program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum How {
    /// The clause's literal argument is replaced (or the clause added):
    /// one build per value.
    Clause,
    /// The clause names a macro: `-DNAME=VALUE` on the build command, one
    /// build per value.
    Macro(String),
    /// libgomp's `GOMP_OPENACC_DIM` at run time, for a dimension the
    /// clauses leave open: no rebuild.
    Runtime,
    /// The construct and its clauses replaced by the value.
    Directive,
    /// Programs built ahead of time, one per value (`--prebuilt`).
    Prebuilt,
}

impl How {
    /// What the user reads: "patched clause (rebuild)", ...
    pub fn describe(&self, p: Param) -> String {
        match self {
            How::Clause => format!("`{p}(N)` patched into the source, one build per value"),
            How::Macro(m) => format!("macro {m} passed as -D{m}=N, one build per value"),
            How::Runtime => {
                format!("GOMP_OPENACC_DIM at run time ({p} is not set in the source), no rebuild")
            }
            How::Directive => "the directive replaced, one build per variant".to_string(),
            How::Prebuilt => "programs built ahead of time, one per value".to_string(),
        }
    }

    pub fn rebuilds(&self) -> bool {
        !matches!(self, How::Runtime)
    }
}

/// One parameter and the values to try.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dim {
    pub param: Param,
    pub values: Vec<String>,
}

/// The space: one [`Dim`] per parameter, in [`Param`] order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Space {
    pub dims: Vec<Dim>,
}

/// A configuration: a value for each dimension of the space, or none at
/// all for the default (the source as it is).
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Config {
    pub values: Vec<(Param, String)>,
}

impl Config {
    pub fn is_default(&self) -> bool {
        self.values.is_empty()
    }

    pub fn get(&self, p: Param) -> Option<&str> {
        self.values
            .iter()
            .find(|(q, _)| *q == p)
            .map(|(_, v)| v.as_str())
    }

    pub fn number(&self, p: Param) -> Option<u64> {
        self.get(p).and_then(|v| v.parse().ok())
    }

    /// "default", or "vector_length=64 num_gangs=264" (the cache and the
    /// table key).
    pub fn key(&self) -> String {
        if self.values.is_empty() {
            return "default".to_string();
        }
        self.values
            .iter()
            .map(|(p, v)| format!("{p}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// A file name for the configuration's program.
    pub fn slug(&self) -> String {
        let mut s: String = self
            .key()
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        s.truncate(60);
        if self.get(Param::Directive).is_some() {
            // Directive texts can share their first 60 characters.
            s.push_str(&format!(
                "-{:08x}",
                crate::key::text_hash(&self.key()) as u32
            ));
        }
        s
    }
}

/// A bad `--space` or `--variant`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--space {given}: {why}")]
pub struct SpaceError {
    pub given: String,
    pub why: String,
}

impl Space {
    /// The space of `--space NAME=V1,V2,...` (or `NAME=A..B`, the powers
    /// of two from A to B) and `--variant DIRECTIVE` arguments.
    pub fn parse(specs: &[String], variants: &[String]) -> Result<Space, SpaceError> {
        let mut space = Space::default();
        for spec in specs {
            let err = |why: String| SpaceError {
                given: spec.clone(),
                why,
            };
            let (name, values) = spec
                .split_once('=')
                .ok_or_else(|| err("expected NAME=V1,V2,...".to_string()))?;
            let param = Param::from_name(name.trim()).filter(|p| *p != Param::Directive);
            let Some(param) = param else {
                return Err(err(format!(
                    "unknown parameter `{}` (vector_length, num_gangs or num_workers; --variant for directives)",
                    name.trim()
                )));
            };
            let mut list = Vec::new();
            for v in values.split(',').map(str::trim).filter(|v| !v.is_empty()) {
                if let Some((a, b)) = v.split_once("..") {
                    let (a, b) = (positive(a).map_err(&err)?, positive(b).map_err(&err)?);
                    if a > b {
                        return Err(err(format!("empty range {v}")));
                    }
                    let mut x = a;
                    while x <= b {
                        list.push(x.to_string());
                        x *= 2;
                    }
                } else {
                    list.push(positive(v).map_err(&err)?.to_string());
                }
            }
            if list.is_empty() {
                return Err(err("no values".to_string()));
            }
            space.add(param, list);
        }
        let variants: Vec<String> = variants
            .iter()
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .collect();
        if !variants.is_empty() {
            space.add(Param::Directive, variants);
        }
        space.dims.sort_by_key(|d| d.param);
        Ok(space)
    }

    fn add(&mut self, param: Param, values: Vec<String>) {
        match self.dims.iter_mut().find(|d| d.param == param) {
            Some(d) => d.values.extend(values),
            None => self.dims.push(Dim { param, values }),
        }
        if let Some(d) = self.dims.iter_mut().find(|d| d.param == param) {
            let mut seen = std::collections::HashSet::new();
            d.values.retain(|v| seen.insert(v.clone()));
        }
    }

    /// Every configuration of the space (the default not included), the
    /// first dimension varying slowest.
    pub fn configs(&self) -> Vec<Config> {
        let mut out = vec![Config::default()];
        for d in &self.dims {
            let mut next = Vec::with_capacity(out.len() * d.values.len());
            for c in &out {
                for v in &d.values {
                    let mut c = c.clone();
                    c.values.push((d.param, v.clone()));
                    next.push(c);
                }
            }
            out = next;
        }
        if self.dims.is_empty() {
            Vec::new()
        } else {
            out
        }
    }

    /// The index of each of the configuration's values in its dimension.
    pub fn position(&self, c: &Config) -> Option<Vec<usize>> {
        self.dims
            .iter()
            .map(|d| {
                let v = c.get(d.param)?;
                d.values.iter().position(|x| x == v)
            })
            .collect()
    }

    /// The configuration at these indices.
    pub fn at(&self, pos: &[usize]) -> Option<Config> {
        let mut c = Config::default();
        for (d, &i) in self.dims.iter().zip(pos) {
            c.values.push((d.param, d.values.get(i)?.clone()));
        }
        Some(c)
    }
}

fn positive(s: &str) -> Result<u64, String> {
    match s.trim().parse::<u64>() {
        Ok(v) if v > 0 => Ok(v),
        _ => Err(format!("`{}` is not a positive integer", s.trim())),
    }
}

/// Why a configuration is not worth running on the hardware: GCC
/// replaces a vector length that is not a multiple of the warp size by
/// 32, a block holds at most 1024 threads, and gangs that do not fill whole
/// waves of the SMs leave SMs idle in the last wave.
pub fn pruned(c: &Config, sm_count: Option<u32>) -> Option<String> {
    let v = c.number(Param::VectorLength);
    if let Some(v) = v {
        if v % 32 != 0 {
            return Some(format!(
                "vector_length {v} is not a multiple of the warp size 32 (GCC launches 32)"
            ));
        }
    }
    let threads = v.unwrap_or(32) * c.number(Param::NumWorkers).unwrap_or(1);
    if threads > 1024 {
        return Some(format!(
            "{threads} threads per block (workers x vector) is over the limit of 1024"
        ));
    }
    if let (Some(g), Some(sms)) = (c.number(Param::NumGangs), sm_count.filter(|&s| s > 0)) {
        if g % u64::from(sms) != 0 {
            return Some(format!(
                "{g} gangs are not whole waves of the device's {sms} SMs"
            ));
        }
    }
    None
}

/// How each dimension of `space` is applied to the directive `d`.
pub fn how_applied(space: &Space, d: &accprof_analyzer::source::Directive) -> Vec<(Param, How)> {
    space
        .dims
        .iter()
        .map(|dim| {
            let p = dim.param;
            let how = match p {
                Param::Directive => How::Directive,
                _ => match d.clause(p.name()).and_then(|c| c.args.as_deref()) {
                    Some(arg) if is_identifier(arg.trim()) => How::Macro(arg.trim().to_string()),
                    Some(_) => How::Clause,
                    None if p == Param::VectorLength => How::Clause,
                    None => How::Runtime,
                },
            };
            (p, how)
        })
        .collect()
}

fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A configuration applied: the source text to build (None: the original),
/// the `-D` definitions and the variables for the run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Applied {
    pub text: Option<String>,
    pub defines: Vec<(String, String)>,
    pub env: Vec<(String, String)>,
}

/// The source `src` with configuration `c` applied to the directive at
/// `line`. The directive keeps its number of lines, so every other line
/// keeps its number (and the trace its attribution).
pub fn apply(
    src: &SourceFile,
    line: u32,
    c: &Config,
    how: &[(Param, How)],
) -> Result<Applied, String> {
    let d = src
        .directive_at(line)
        .ok_or_else(|| format!("no OpenACC directive at {}:{line}", src.path))?;
    let mut out = Applied::default();
    if c.is_default() {
        return Ok(out);
    }
    let mut construct = d.construct_name();
    let mut clauses: Vec<accprof_analyzer::source::Clause> = d.clauses.clone();
    let mut patched = false;
    if let Some(v) = c.get(Param::Directive) {
        let (words, rest) = parse_variant(v, src.lang);
        construct = words;
        clauses = rest;
        patched = true;
    }
    let mut dims: Vec<String> = vec![String::new(); 2];
    for (p, v) in &c.values {
        let h = how.iter().find(|(q, _)| q == p).map(|(_, h)| h);
        match (p, h) {
            (Param::Directive, _) => {}
            (_, Some(How::Macro(m))) => out.defines.push((m.clone(), v.clone())),
            (_, Some(How::Runtime)) => {
                if let Some(i) = p.dim_index() {
                    dims[i] = v.clone();
                }
            }
            (_, Some(How::Prebuilt)) => {}
            _ => {
                let clause = accprof_analyzer::source::Clause {
                    name: p.name().to_string(),
                    args: Some(v.clone()),
                };
                match clauses.iter_mut().find(|x| x.name == p.name()) {
                    Some(x) => *x = clause,
                    None => clauses.push(clause),
                }
                patched = true;
            }
        }
    }
    if dims.iter().any(|d| !d.is_empty()) {
        out.env.push((
            "GOMP_OPENACC_DIM".to_string(),
            format!("{}:{}:", dims[0], dims[1]),
        ));
    }
    if patched {
        let texts: Vec<String> = clauses.iter().map(|c| c.text()).collect();
        let mut new_line = d.render(&construct, &texts);
        for _ in d.line..d.end_line {
            new_line.push('\n');
        }
        let mut lines: Vec<&str> = src.text.split_inclusive('\n').collect();
        let (a, b) = (d.line as usize - 1, d.end_line as usize);
        if b > lines.len() {
            return Err(format!(
                "{}:{line}: the directive runs past the end",
                src.path
            ));
        }
        let ends_with_newline = lines[b - 1].ends_with('\n');
        if ends_with_newline {
            new_line.push('\n');
        }
        lines.splice(a..b, std::iter::once(new_line.as_str()));
        out.text = Some(lines.concat());
    }
    Ok(out)
}

/// `parallel loop collapse(2) reduction(max:dt)` (with or without the
/// sentinel) -> the construct words and the clauses.
fn parse_variant(v: &str, lang: Lang) -> (String, Vec<accprof_analyzer::source::Clause>) {
    let body = v
        .trim()
        .strip_prefix(lang.sentinel())
        .unwrap_or(v.trim())
        .trim();
    let line = format!("{} {body}\n", lang.sentinel());
    let f = SourceFile::new(
        "variant",
        std::path::PathBuf::new(),
        lang,
        match lang {
            Lang::C => line,
            Lang::Fortran => format!("program p\n{line}end program p\n"),
        },
    );
    let at = if lang == Lang::C { 1 } else { 2 };
    match f.directive_at(at) {
        Some(d) => (d.construct_name(), d.clauses),
        None => (body.to_string(), Vec::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c_file(text: &str) -> SourceFile {
        SourceFile::new("t.c", "t.c".into(), Lang::C, text.to_string())
    }

    fn space(s: &[&str], v: &[&str]) -> Space {
        let s: Vec<String> = s.iter().map(|x| x.to_string()).collect();
        let v: Vec<String> = v.iter().map(|x| x.to_string()).collect();
        Space::parse(&s, &v).expect("space parses")
    }

    #[test]
    fn spaces_parse_with_ranges_and_reject_nonsense() {
        let s = space(&["vector_length=32..256", "num_gangs=132,264"], &[]);
        assert_eq!(s.dims[0].param, Param::NumGangs);
        assert_eq!(s.dims[1].values, ["32", "64", "128", "256"]);
        let configs = s.configs();
        assert_eq!(configs.len(), 8);
        assert_eq!(configs[1].key(), "num_gangs=132 vector_length=64");
        assert_eq!(s.position(&configs[5]), Some(vec![1, 1]));
        assert_eq!(s.at(&[1, 1]).as_ref(), Some(&configs[5]));
        for bad in [
            "vl=32",
            "vector_length",
            "vector_length=0",
            "vector_length=64..32",
            "num_gangs=x",
        ] {
            let e = Space::parse(&[bad.to_string()], &[]);
            assert!(e.is_err(), "{bad} parsed");
        }
        let e = Space::parse(&["vl=32".to_string()], &[])
            .err()
            .map(|e| e.to_string());
        assert!(e
            .unwrap_or_default()
            .starts_with("--space vl=32: unknown parameter `vl`"));
    }

    #[test]
    fn hardware_limits_prune() {
        let c = |v: &[(Param, &str)]| Config {
            values: v.iter().map(|(p, s)| (*p, s.to_string())).collect(),
        };
        assert!(pruned(&c(&[(Param::VectorLength, "48")]), None).is_some());
        assert!(pruned(&c(&[(Param::VectorLength, "64")]), None).is_none());
        assert!(pruned(
            &c(&[(Param::NumWorkers, "4"), (Param::VectorLength, "512")]),
            None
        )
        .is_some());
        assert!(pruned(&c(&[(Param::NumGangs, "200")]), Some(132)).is_some());
        assert!(pruned(&c(&[(Param::NumGangs, "264")]), Some(132)).is_none());
        assert!(pruned(&c(&[(Param::NumGangs, "200")]), None).is_none());
    }

    #[test]
    fn clauses_are_patched_added_or_passed_as_macros_or_at_run_time() {
        let text = "int main(void) {\n#pragma acc parallel loop num_workers(4) vector_length(VL) \\\n    present(a) // hot\n  for (;;) ;\n}\n";
        let f = c_file(text);
        let s = space(&["vector_length=64", "num_workers=8", "num_gangs=264"], &[]);
        let d = f.directive_at(2).expect("directive");
        let how = how_applied(&s, &d);
        assert_eq!(
            how,
            [
                (Param::NumGangs, How::Runtime),
                (Param::NumWorkers, How::Clause),
                (Param::VectorLength, How::Macro("VL".into()))
            ]
        );
        let c = &s.configs()[0];
        let a = apply(&f, 2, c, &how).expect("applies");
        assert_eq!(a.defines, [("VL".to_string(), "64".to_string())]);
        assert_eq!(
            a.env,
            [("GOMP_OPENACC_DIM".to_string(), "264::".to_string())]
        );
        let patched = a.text.expect("patched");
        assert_eq!(
            patched,
            "int main(void) {\n#pragma acc parallel loop num_workers(8) vector_length(VL) present(a) // hot\n\n  for (;;) ;\n}\n",
            "two lines stay two lines"
        );
        // The default changes nothing.
        assert_eq!(
            apply(&f, 2, &Config::default(), &how),
            Ok(Applied::default())
        );
        // A missing vector_length clause is added.
        let f = c_file("#pragma acc parallel loop collapse(2)\nfor (;;);");
        let s = space(&["vector_length=128"], &[]);
        let how = how_applied(&s, &f.directive_at(1).expect("directive"));
        let a = apply(&f, 1, &s.configs()[0], &how).expect("applies");
        assert_eq!(
            a.text.as_deref(),
            Some("#pragma acc parallel loop collapse(2) vector_length(128)\nfor (;;);")
        );
        assert!(apply(&f, 2, &s.configs()[0], &how).is_err());
    }

    #[test]
    fn a_variant_replaces_the_directive() {
        let f = c_file("  x();\n#pragma acc kernels // update\n  for (;;) ;\n");
        let s = space(&[], &["parallel loop collapse(2) reduction(max:dt)"]);
        let how = how_applied(&s, &f.directive_at(2).expect("directive"));
        let a = apply(&f, 2, &s.configs()[0], &how).expect("applies");
        assert_eq!(
            a.text.as_deref(),
            Some("  x();\n#pragma acc parallel loop collapse(2) reduction(max:dt) // update\n  for (;;) ;\n")
        );
        assert!(s.configs()[0].slug().starts_with("directive_parallel_loop"));
    }
}
