//! A place in a source's text.

/// A place in the text: line (1-based) and column in characters
/// (0-based).
pub type Pos = (u32, u32);
