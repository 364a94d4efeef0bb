//! A place in a source's text, and the lines a node of the parse tree
//! spans.

use tree_sitter::Node;

/// A place in the text: line (1-based) and column in characters
/// (0-based).
pub type Pos = (u32, u32);

/// The line a node starts on (1-based).
pub(crate) fn line(n: Node) -> u32 {
    n.start_position().row as u32 + 1
}

/// The line a node ends on (1-based). A node ending at column 0 ends on
/// the line before (a trailing newline).
pub(crate) fn end_line(n: Node) -> u32 {
    let p = n.end_position();
    if p.column == 0 && p.row > n.start_position().row {
        p.row as u32
    } else {
        p.row as u32 + 1
    }
}
