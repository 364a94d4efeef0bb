//! A progress bar on stderr while a trace loads: bytes read of the file's
//! size. It shows only when stderr is a terminal and only once loading has
//! taken a second, so quick loads, pipes and tests never see it.

use std::io::IsTerminal;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How long a load runs before the bar appears.
const QUIET_FOR: Duration = Duration::from_secs(1);

/// The bar of one trace's load; cleared when dropped.
pub struct LoadBar {
    bar: ProgressBar,
}

impl Drop for LoadBar {
    fn drop(&mut self) {
        self.bar.finish_and_clear();
    }
}

/// `opts` with a progress bar for loading `path`, when stderr is a terminal
/// and `path` is a regular file (whose size is known); the bar lasts as
/// long as the returned [`LoadBar`].
pub fn with_bar(
    path: &Path,
    opts: &accprof_analyzer::LoadOptions,
) -> (accprof_analyzer::LoadOptions, Option<LoadBar>) {
    let mut opts = opts.clone();
    if !std::io::stderr().is_terminal() {
        return (opts, None);
    }
    let size = match std::fs::metadata(path) {
        Ok(m) if m.is_file() && m.len() > 0 => m.len(),
        _ => return (opts, None),
    };
    let bar = ProgressBar::with_draw_target(Some(size), ProgressDrawTarget::hidden());
    if let Ok(style) = ProgressStyle::with_template(
        "reading {msg} {wide_bar} {bytes}/{total_bytes} ({binary_bytes_per_sec}, {eta} left)",
    ) {
        bar.set_style(style);
    }
    bar.set_message(
        path.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
    );
    let start = Instant::now();
    let shown = AtomicBool::new(false);
    let b = bar.clone();
    opts.progress = Some(Arc::new(move |done| {
        b.set_position(done);
        if !shown.load(Ordering::Relaxed) && start.elapsed() >= QUIET_FOR {
            shown.store(true, Ordering::Relaxed);
            b.set_draw_target(ProgressDrawTarget::stderr());
        }
    }));
    (opts, Some(LoadBar { bar }))
}
