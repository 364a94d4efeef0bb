//! Colors by kind, from the 16 basic colors only (they read the same in
//! any terminal theme), and none at all under NO_COLOR: then the glyphs
//! and the modifiers (reverse, bold, underline) carry the meaning.

use ratatui::style::{Color, Modifier, Style};

use crate::lanes::Tag;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Palette {
    pub color: bool,
}

impl Palette {
    /// Colors unless NO_COLOR is set to anything non-empty (no-color.org).
    pub fn from_env() -> Palette {
        let off = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        Palette { color: !off }
    }

    fn fg(self, c: Color) -> Style {
        if self.color {
            Style::default().fg(c)
        } else {
            Style::default()
        }
    }

    pub fn tag(self, tag: Tag) -> Style {
        self.fg(match tag {
            Tag::Compute => Color::Green,
            Tag::Data => Color::Blue,
            Tag::EnterData => Color::LightCyan,
            Tag::ExitData => Color::LightMagenta,
            Tag::Update => Color::LightYellow,
            Tag::Wait => Color::Red,
            Tag::Api => Color::Gray,
            Tag::Kernel => Color::Yellow,
            Tag::Upload => Color::Cyan,
            Tag::Download => Color::Magenta,
            Tag::Memset => Color::White,
            Tag::Mpi => Color::LightRed,
            Tag::UnreadDownload => Color::Magenta,
            // An error: bold red on the lane, whatever surrounds it.
            Tag::Incoherent => return self.fg(Color::Red).add_modifier(Modifier::BOLD),
        })
    }

    pub fn memory(self) -> Style {
        self.fg(Color::LightBlue)
    }

    /// An event some finding names.
    pub fn marked(self, s: Style) -> Style {
        s.add_modifier(Modifier::UNDERLINED)
    }

    /// An event of the chosen finding, line or search.
    pub fn highlighted(self, s: Style) -> Style {
        let s = s.add_modifier(Modifier::REVERSED);
        if self.color {
            s.fg(Color::LightRed)
        } else {
            s
        }
    }

    pub fn selected(self, s: Style) -> Style {
        let s = s.add_modifier(Modifier::REVERSED | Modifier::BOLD);
        if self.color {
            s.fg(Color::White)
        } else {
            s
        }
    }

    pub fn mark_glyph(self) -> Style {
        self.fg(Color::Red)
    }

    pub fn highlight_glyph(self) -> Style {
        self.fg(Color::LightRed).add_modifier(Modifier::BOLD)
    }

    pub fn title(self) -> Style {
        Style::default().add_modifier(Modifier::BOLD)
    }

    pub fn dim(self) -> Style {
        if self.color {
            Style::default().fg(Color::DarkGray)
        } else {
            Style::default()
        }
    }

    pub fn cursor(self) -> Style {
        Style::default().add_modifier(Modifier::REVERSED)
    }

    pub fn group(self) -> Style {
        let s = Style::default().add_modifier(Modifier::BOLD);
        if self.color {
            s.fg(Color::LightBlue)
        } else {
            s
        }
    }
}

/// The glyph of a column that an event of `tag` fills (colors aside, the
/// host constructs' kinds differ by shade).
pub fn full_glyph(tag: Tag) -> &'static str {
    match tag {
        Tag::Compute | Tag::Kernel | Tag::Upload | Tag::Download | Tag::Memset => "█",
        Tag::EnterData | Tag::ExitData => "▓",
        Tag::Data | Tag::Api => "▒",
        Tag::Update | Tag::Wait => "░",
        // MPI calls stand apart from every construct's shade.
        Tag::Mpi => "▚",
        // Instants of the coherence check: an error, and waste.
        Tag::Incoherent => "!",
        Tag::UnreadDownload => "↓",
    }
}

/// Bars of the memory lane, from empty to full.
pub const LEVELS: [&str; 9] = [" ", "▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"];
