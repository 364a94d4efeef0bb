//! accprof-tui: the interactive terminal timeline (ratatui + crossterm) over
//! loaded traces: lanes per host thread, device queue and copy direction,
//! device memory in use, zoom, pan, search, the findings and the summary by
//! source line, several traces (MPI ranks) on one clock.
//!
//! It only reads the analyzer's model; it never writes traces. The parts:
//! [`data`] (what is shown, made once), [`lanes`] (time-sorted arrays and
//! per-column aggregation), [`state`] (plain state and its operations),
//! [`update`] (input to state), [`view`] (state to a buffer), and the
//! terminal loop.

pub mod data;
pub mod lanes;
pub mod state;
pub mod style;
mod term;
pub mod update;
pub mod view;

pub use data::Session;
pub use term::{check_terminal, run, Error};

/// Renders the session as `state` shows it on a `width` x `height`
/// screen, as text (for tests and the benchmark).
pub fn render_text(session: &Session, state: &state::State, width: u16, height: u16) -> String {
    let area = ratatui::layout::Rect::new(0, 0, width, height);
    let mut buf = ratatui::buffer::Buffer::empty(area);
    view::render(
        session,
        state,
        style::Palette { color: false },
        area,
        &mut buf,
    );
    view::buffer_text(&buf)
}
