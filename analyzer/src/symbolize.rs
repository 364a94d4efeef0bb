//! Offline symbolization of call sites: module + offset -> file, function,
//! line, with addr2line over the module's DWARF. Loaders are cached per
//! module path; a missing or unreadable binary is said once and its sites
//! stay as addresses.

use std::collections::HashMap;

use accprof_trace::Module;

pub enum SymbolizedSite {
    Found {
        file: String,
        function: String,
        line: Option<u32>,
    },
    /// The module could not be read, or has no line tables for the address.
    NoDebugInfo { function: Option<String> },
}

#[derive(Default)]
pub struct Symbolizer {
    loaders: HashMap<String, Option<addr2line::Loader>>,
    /// What could not be done, one line per module.
    pub notes: Vec<String>,
}

impl Symbolizer {
    pub fn new() -> Self {
        Self::default()
    }

    /// Looks up a return address (module-relative): the call instruction is
    /// the byte before it.
    pub fn lookup(&mut self, module: &Module, return_offset: u64) -> SymbolizedSite {
        let loader = self
            .loaders
            .entry(module.path.clone())
            .or_insert_with(|| addr2line::Loader::new(&module.path).ok());
        let Some(loader) = loader.as_ref() else {
            let note = format!(
                "{}: cannot read the binary for source lines; sites are shown as addresses",
                module.path
            );
            if !self.notes.contains(&note) {
                self.notes.push(note);
            }
            return SymbolizedSite::NoDebugInfo { function: None };
        };
        let probe = return_offset.saturating_sub(1);
        let mut function = None;
        let mut location = None;
        if let Ok(mut frames) = loader.find_frames(probe) {
            // The innermost frame is where the call is written in the source.
            if let Ok(Some(frame)) = frames.next() {
                function = frame
                    .function
                    .as_ref()
                    .and_then(|f| f.demangle().ok().map(|s| s.into_owned()));
                location = frame
                    .location
                    .and_then(|l| Some((l.file?.to_string(), l.line)));
            }
        }
        if function.is_none() {
            function = loader.find_symbol(probe).map(str::to_string);
        }
        match location {
            Some((file, line)) => SymbolizedSite::Found {
                file,
                function: function.unwrap_or_else(|| "?".into()),
                line,
            },
            None => {
                let note = format!(
                    "{}: no line information (build with -g for source lines)",
                    module.path
                );
                if !self.notes.contains(&note) {
                    self.notes.push(note);
                }
                SymbolizedSite::NoDebugInfo { function }
            }
        }
    }
}
