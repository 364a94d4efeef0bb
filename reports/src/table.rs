//! Tables as rows of typed cells, and their two streaming encodings: CSV
//! (the `csv` crate) and JSON. A table is a list of documented columns and
//! a function that hands its rows, one at a time, to a [`RowSink`]: no
//! table is ever held whole, so a table of hundreds of millions of rows
//! costs one row of memory.

use std::io::{self, Write};

/// The type of a column, as pandas reads it (`dtype=` of `read_csv`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dtype {
    /// An integer always present: pandas `int64`.
    Int,
    /// An integer that may be missing (empty in CSV, null in JSON): pandas
    /// `Int64`.
    OptInt,
    /// A number with a fraction (times in microseconds, ratios): pandas
    /// `float64`; missing values are NaN.
    Float,
    /// Text: pandas `string`.
    Str,
    /// `true` or `false`: pandas `bool`.
    Bool,
}

impl Dtype {
    /// The pandas dtype name.
    pub fn pandas(self) -> &'static str {
        match self {
            Dtype::Int => "int64",
            Dtype::OptInt => "Int64",
            Dtype::Float => "float64",
            Dtype::Str => "string",
            Dtype::Bool => "bool",
        }
    }
}

/// One column: its name (with the unit: `_us`, `bytes`), type and meaning.
#[derive(Debug, Clone, Copy)]
pub struct Column {
    pub name: &'static str,
    pub dtype: Dtype,
    pub doc: &'static str,
}

/// Shorthand for the column tables.
pub const fn col(name: &'static str, dtype: Dtype, doc: &'static str) -> Column {
    Column { name, dtype, doc }
}

/// One value of a row.
#[derive(Debug, Clone, Copy)]
pub enum Cell<'a> {
    /// Missing (empty in CSV, null in JSON).
    Null,
    Int(u64),
    SInt(i64),
    /// A duration or time in nanoseconds, written in microseconds with
    /// three decimals (exact: no rounding).
    Us(u64),
    Float(f64),
    Str(&'a str),
    Bool(bool),
}

impl<'a> Cell<'a> {
    pub fn opt_int(v: Option<u64>) -> Cell<'a> {
        v.map_or(Cell::Null, Cell::Int)
    }

    pub fn opt_us(v: Option<u64>) -> Cell<'a> {
        v.map_or(Cell::Null, Cell::Us)
    }

    pub fn opt_str(v: Option<&'a str>) -> Cell<'a> {
        v.map_or(Cell::Null, Cell::Str)
    }
}

/// Where rows go.
pub trait RowSink {
    /// One row: as many cells as the table has columns, in their order.
    fn row(&mut self, cells: &[Cell<'_>]) -> io::Result<()>;
}

/// Writes a cell's text (CSV) into `buf`, which is cleared first.
fn cell_text(buf: &mut Vec<u8>, cell: &Cell<'_>) {
    buf.clear();
    // Writing into a Vec cannot fail.
    let _ = match *cell {
        Cell::Null => Ok(()),
        Cell::Int(v) => write!(buf, "{v}"),
        Cell::SInt(v) => write!(buf, "{v}"),
        Cell::Us(ns) => write!(buf, "{}.{:03}", ns / 1000, ns % 1000),
        Cell::Float(v) if v.is_finite() => write!(buf, "{v}"),
        Cell::Float(_) => Ok(()),
        Cell::Str(s) => buf.write_all(s.as_bytes()),
        Cell::Bool(b) => buf.write_all(if b { b"true" } else { b"false" }),
    };
}

/// CSV rows: a header line of the column names, then one line per row.
pub struct CsvSink<W: Write> {
    out: csv::Writer<W>,
    buf: Vec<u8>,
}

impl<W: Write> CsvSink<W> {
    /// Writes the header now.
    pub fn new(out: W, columns: &[Column]) -> io::Result<Self> {
        let mut out = csv::WriterBuilder::new().from_writer(out);
        out.write_record(columns.iter().map(|c| c.name))
            .map_err(io::Error::from)?;
        Ok(CsvSink {
            out,
            buf: Vec::with_capacity(64),
        })
    }

    pub fn finish(mut self) -> io::Result<()> {
        self.out.flush()
    }
}

impl<W: Write> RowSink for CsvSink<W> {
    fn row(&mut self, cells: &[Cell<'_>]) -> io::Result<()> {
        for c in cells {
            cell_text(&mut self.buf, c);
            self.out.write_field(&self.buf).map_err(io::Error::from)?;
        }
        self.out
            .write_record(None::<&[u8]>)
            .map_err(io::Error::from)
    }
}

/// JSON rows: an array of objects keyed by column name, written as they
/// come (`[` on creation, `]` on [`JsonRows::finish`]).
pub struct JsonRows<'w, W: Write> {
    out: &'w mut W,
    columns: &'static [Column],
    first: bool,
    buf: Vec<u8>,
}

impl<'w, W: Write> JsonRows<'w, W> {
    pub fn new(out: &'w mut W, columns: &'static [Column]) -> io::Result<Self> {
        out.write_all(b"[")?;
        Ok(JsonRows {
            out,
            columns,
            first: true,
            buf: Vec::with_capacity(64),
        })
    }

    pub fn finish(self) -> io::Result<()> {
        self.out.write_all(if self.first { b"]" } else { b"\n]" })
    }
}

/// A JSON string literal.
pub fn json_str<W: Write>(out: &mut W, s: &str) -> io::Result<()> {
    serde_json::to_writer(out, s).map_err(io::Error::from)
}

impl<W: Write> RowSink for JsonRows<'_, W> {
    fn row(&mut self, cells: &[Cell<'_>]) -> io::Result<()> {
        self.out
            .write_all(if self.first { b"\n{" } else { b",\n{" })?;
        self.first = false;
        for (i, (c, cell)) in self.columns.iter().zip(cells).enumerate() {
            if i > 0 {
                self.out.write_all(b",")?;
            }
            json_str(self.out, c.name)?;
            self.out.write_all(b":")?;
            match cell {
                Cell::Str(s) => json_str(self.out, s)?,
                Cell::Null => self.out.write_all(b"null")?,
                Cell::Float(v) if !v.is_finite() => self.out.write_all(b"null")?,
                other => {
                    cell_text(&mut self.buf, other);
                    self.out.write_all(&self.buf)?;
                }
            }
        }
        self.out.write_all(b"}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const COLS: &[Column] = &[
        col("id", Dtype::Int, "id"),
        col("time_us", Dtype::Float, "time"),
        col("name", Dtype::Str, "name"),
        col("n", Dtype::OptInt, "maybe"),
    ];

    fn rows(sink: &mut dyn RowSink) {
        sink.row(&[
            Cell::Int(1),
            Cell::Us(1_234_567),
            Cell::Str("a,\"b\""),
            Cell::Null,
        ])
        .expect("row");
        sink.row(&[Cell::Int(2), Cell::Us(5), Cell::Str("c"), Cell::Int(7)])
            .expect("row");
    }

    #[test]
    fn csv_quotes_and_leaves_missing_values_empty() {
        let mut out = Vec::new();
        let mut sink = CsvSink::new(&mut out, COLS).expect("header");
        rows(&mut sink);
        sink.finish().expect("flush");
        assert_eq!(
            String::from_utf8(out).expect("utf-8"),
            "id,time_us,name,n\n1,1234.567,\"a,\"\"b\"\"\",\n2,0.005,c,7\n"
        );
    }

    #[test]
    fn json_rows_are_objects_with_nulls() {
        let mut out = Vec::new();
        let mut sink = JsonRows::new(&mut out, COLS).expect("open");
        rows(&mut sink);
        sink.finish().expect("close");
        let v: serde_json::Value = serde_json::from_slice(&out).expect("parses");
        assert_eq!(v[0]["name"], "a,\"b\"");
        assert_eq!(v[0]["time_us"], 1234.567);
        assert!(v[0]["n"].is_null());
        assert_eq!(v[1]["n"], 7);
        let mut empty = Vec::new();
        JsonRows::new(&mut empty, COLS)
            .expect("open")
            .finish()
            .expect("close");
        assert_eq!(empty, b"[]");
    }
}
