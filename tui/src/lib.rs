//! accprof-tui: the interactive terminal timeline (ratatui + crossterm) over a
//! loaded trace: lanes per host thread and device queue, zoom, pan, search and
//! the findings list.
//!
//! It only reads the analyzer's model; it never writes traces.
