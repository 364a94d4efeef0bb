//! A configuration's program, built through the [`Runner`]: its clause
//! patched into the user's source for the build and put back right after
//! it, or its `-D` definitions added to the user's build command; a build
//! that fails is that configuration's failure, named by its first error,
//! with the whole log kept. Programs built ahead of time on another
//! machine ([`prebuild`], [`Prebuilt`]) are picked here too.
//!
//! Which programs are already built is [`super::cache::Programs`]'s.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::backup::InPlace;
use crate::error::{first_error, stderr_tail, Error};
use crate::key::text_hash;
use crate::runner::{BuildOutput, Runner};
use crate::space::{self, Config, How, Space};

use super::{Opened, Sweep};

/// Programs built ahead of time (`accprof tune --prebuild DIR`), for a
/// machine that cannot build them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Prebuilt {
    pub source: String,
    pub line: u32,
    /// xxh3 of the source they were built from.
    pub source_hash: String,
    pub build: String,
    /// (configuration key, program file name in the directory).
    pub variants: Vec<(String, String)>,
}

/// The file in a prebuild directory that lists its programs.
pub const PREBUILT_LIST: &str = "variants.json";

impl Prebuilt {
    pub fn read(dir: &Path) -> Result<Prebuilt, Error> {
        crate::prebuilt::read(dir, PREBUILT_LIST, "accprof tune --prebuild")
    }
}

impl<R: Runner + ?Sized> Sweep<'_, '_, R> {
    /// The program of configuration `i`, built when needed (None: the one
    /// the build leaves in place, or a run command that names no `{out}`);
    /// the inner error is why this configuration has none (its build
    /// failed), the outer one ends the sweep (the source cannot be patched
    /// or restored, or a signal stopped it).
    pub(super) fn program(&mut self, i: usize) -> Result<Result<Option<PathBuf>, String>, Error> {
        let plan = self.plan;
        let applied = self.states[i].applied.clone();
        let key = (applied.text.clone(), applied.defines.clone());
        if let Some((dir, pre)) = plan.prebuilt {
            let wanted = self.prebuilt_key(&self.states[i].config);
            return Ok(match pre.variants.iter().find(|(k, _)| *k == wanted) {
                Some((_, file)) => Ok(Some(dir.join(file))),
                None => Err(format!(
                    "no program for `{wanted}` in {} (prebuild it)",
                    dir.display()
                )),
            });
        }
        let Some(template) = plan.build else {
            return Ok(Ok(None));
        };
        let per_config = template.contains("{out}");
        if let Some(program) = self.programs.get(&key, per_config) {
            return Ok(Ok(program));
        }
        let out = plan.work.join("bin").join(self.states[i].config.slug());
        let template = with_defines(template, &applied.defines);
        if self.stopped() {
            return Err(self.interrupted());
        }
        if let Some(t) = &applied.text {
            self.restore.write(t)?;
        }
        let t0 = Instant::now();
        let built = self.runner.build(&template, plan.source, &out);
        self.cost.build_ns += t0.elapsed().as_nanos() as u64;
        self.cost.builds += 1;
        self.restore.unpatch()?;
        let built = match built {
            Ok(b) => b,
            Err(e) => return Ok(Err(e.to_string())),
        };
        if !built.success {
            let said = first_error(&built.stderr)
                .map(|l| format!(": {l}"))
                .unwrap_or_default();
            let log = build_log(plan.work, &self.states[i].config, &built)
                .map(|p| format!("; full log: {}", p.display()))
                .unwrap_or_default();
            return Ok(Err(format!(
                "build failed (exit code {}): `{}`{said}{log}",
                built.code, built.command
            )));
        }
        let program = per_config.then_some(out);
        self.programs.add(key, program.clone());
        Ok(Ok(program))
    }

    /// The configuration restricted to what the programs differ by.
    fn prebuilt_key(&self, c: &Config) -> String {
        Config {
            values: c
                .values
                .iter()
                .filter(|(p, _)| self.how.iter().any(|(q, h)| q == p && *h == How::Prebuilt))
                .cloned()
                .collect(),
        }
        .key()
    }
}

/// The build command with `-DNAME=VALUE` for each definition: in place of
/// `{defines}` when the template has it, else at its end.
pub fn with_defines(template: &str, defines: &[(String, String)]) -> String {
    let flags: Vec<String> = defines.iter().map(|(k, v)| format!("-D{k}={v}")).collect();
    let flags = flags.join(" ");
    if template.contains("{defines}") {
        template.replace("{defines}", &flags)
    } else if flags.is_empty() {
        template.to_string()
    } else {
        format!("{template} {flags}")
    }
}

/// Writes what a failed build said to `dir/build-SLUG.log`, the command
/// first, and returns its path (None when it cannot be written: the
/// error still names the first error line).
fn build_log(dir: &Path, c: &Config, built: &BuildOutput) -> Option<PathBuf> {
    let path = dir.join(format!("build-{}.log", c.slug()));
    let mut text = format!("$ {}\n", built.command).into_bytes();
    text.extend_from_slice(&built.stderr);
    std::fs::write(&path, text).ok()?;
    Some(path)
}

/// Builds every configuration's program into `dir` (for a machine that
/// cannot build), with [`PREBUILT_LIST`] naming them. Configurations that
/// differ only in run-time settings share a program; hardware limits that
/// need no device prune as in a sweep.
pub fn prebuild<R: Runner + ?Sized>(
    runner: &mut R,
    source: &Path,
    line: u32,
    build: &str,
    space: &Space,
    dir: &Path,
    stop: Option<&AtomicBool>,
) -> Result<Prebuilt, Error> {
    let Opened {
        times,
        original,
        src,
        directive: d,
    } = Opened::read(source, line)?;
    let name = src.path.clone();
    let how = space::how_applied(space, &d);
    std::fs::create_dir_all(dir).map_err(|e| Error::Io {
        what: format!("cannot create {}", dir.display()),
        source: e,
    })?;
    let mut restore = InPlace::new(source, original, times);
    let mut pre = Prebuilt {
        source: name.clone(),
        line,
        source_hash: format!("{:016x}", text_hash(&src.text)),
        build: build.to_string(),
        variants: Vec::new(),
    };
    let mut seen = Vec::new();
    for c in std::iter::once(Config::default()).chain(space.configs()) {
        if space::pruned(&c, None).is_some() {
            continue;
        }
        let c = Config {
            values: c
                .values
                .into_iter()
                .filter(|(p, _)| how.iter().any(|(q, h)| q == p && h.rebuilds()))
                .collect(),
        };
        if seen.contains(&c) {
            continue;
        }
        seen.push(c.clone());
        if stop.is_some_and(|s| s.load(Ordering::SeqCst)) {
            restore.restore()?;
            return Err(Error::Tune(
                "interrupted: the source is restored".to_string(),
            ));
        }
        let a = space::apply(&src, line, &c, &how).map_err(Error::Tune)?;
        let file = c.slug();
        let out = dir.join(&file);
        if let Some(t) = &a.text {
            restore.write(t)?;
        }
        let built = runner.build(&with_defines(build, &a.defines), source, &out);
        restore.unpatch()?;
        let built = built?;
        if !built.success {
            return Err(Error::Build {
                label: c.key(),
                code: built.code,
                stderr_tail: stderr_tail(&built.stderr),
                said: first_error(&built.stderr).map(String::into_boxed_str),
                log: build_log(dir, &c, &built).map(PathBuf::into_boxed_path),
                command: built.command,
            });
        }
        if !out.is_file() {
            return Err(Error::Tune(format!(
                "the build of `{}` did not write {} (the build command needs {{out}})",
                c.key(),
                out.display()
            )));
        }
        pre.variants.push((c.key(), file));
    }
    restore.restore()?;
    crate::prebuilt::write(dir, PREBUILT_LIST, &pre)?;
    Ok(pre)
}

#[cfg(test)]
mod tests {
    use super::super::testing::{built, program, runs_of, with_sweep, Fixture, SOURCE};
    use crate::runner::{MockProgram, MockRunner};

    #[test]
    fn a_failed_build_fails_its_configuration_without_a_run_and_the_sweep_goes_on() {
        let f = Fixture::new(&["vector_length=64,128"]);
        let d = f.path();
        let plan = f.plan();
        let mut runner = MockRunner::new(vec![
            program(d, "x\n", 32, &[100_000; 4]),
            MockProgram {
                build_code: 1,
                build_stderr: "app.c:3:9: error: bad clause\n".to_string(),
                ..MockProgram::default()
            },
            program(d, "x\n", 128, &[80_000; 4]),
        ]);
        let (failed, source_after) = with_sweep(&mut runner, &plan, |s| {
            s.measure(0).expect("measures");
            s.measure(1).expect("a failed build does not end the sweep");
            let source_after = std::fs::read_to_string(&f.source).expect("source");
            s.measure(2).expect("measures");
            (s.states[1].failed.clone(), source_after)
        });
        let failed = failed.expect("64 failed");
        assert!(
            failed.starts_with("build failed (exit code 1): `gcc -fopenacc ")
                && failed.contains(": app.c:3:9: error: bad clause; full log: "),
            "{failed}"
        );
        assert_eq!(
            source_after, SOURCE,
            "the patch is put back after the build"
        );
        assert_eq!(built(&runner), ["default", "64", "128"], "built once");
        assert_eq!(runs_of(&runner, "vector_length_64"), 0);
        assert_eq!(runs_of(&runner, "vector_length_128"), 4);
    }

    #[test]
    fn defines_go_where_the_template_says_else_at_its_end() {
        let d = [("VL".to_string(), "64".to_string())];
        assert_eq!(
            super::with_defines("cc {defines} -c {src}", &d),
            "cc -DVL=64 -c {src}"
        );
        assert_eq!(super::with_defines("cc {src}", &d), "cc {src} -DVL=64");
        assert_eq!(super::with_defines("cc {src}", &[]), "cc {src}");
    }
}
