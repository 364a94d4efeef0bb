//! Plots of a run (plotters), as SVG or PNG: a timeline overview, time per
//! source line split into kernel / copyin / copyout / host, the transfer
//! sizes with their bandwidth, and per-rank bars for several traces.
//!
//! Text is drawn with a font built into the binary (DejaVu Sans Mono,
//! through plotters' `ab_glyph` feature), so PNGs need no system fonts at
//! run time and come out the same on every machine.

use std::io;
use std::ops::Range;
use std::sync::Once;

use plotters::coord::combinators::WithKeyPoints;
use plotters::coord::types::RangedCoordi32;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::{FontStyle, FontTransform};
use plotters_backend::{
    BackendColor, BackendCoord, BackendStyle, BackendTextStyle, DrawingErrorKind,
};

use accprof_analyzer::summary::MergedSummary;
use accprof_analyzer::vocabulary::CopyKind;

use crate::export::RunInput;

/// Which plot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plot {
    /// Busy time per lane (host threads, device streams, copies) over time.
    Timeline,
    /// Time per source line, kernel / copyin / copyout / host stacked.
    Lines,
    /// Transfers per size (powers of two), with the bandwidth of each size.
    Sizes,
    /// Kernel, transfer and other host time per rank.
    Ranks,
}

/// SVG (text) or PNG (pixels).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Image {
    Svg,
    Png,
}

/// Lines shown in the per-line plot (the costliest).
pub const MAX_LINES: usize = 25;
/// Columns the timeline overview is binned into.
pub const TIMELINE_COLUMNS: usize = 1200;

const WIDTH: u32 = 1200;
const FONT: &[u8] = include_bytes!("../assets/DejaVuSansMono.ttf");
const FAMILY: &str = "accprof-mono";

/// The series' colours: kernel, copyin, copyout, host.
pub const KERNEL: RGBColor = RGBColor(31, 119, 180);
pub const COPYIN: RGBColor = RGBColor(255, 127, 14);
pub const COPYOUT: RGBColor = RGBColor(44, 160, 44);
pub const HOST: RGBColor = RGBColor(150, 150, 150);

/// The built-in font's family, registered on first use: every plot's
/// text uses it, so no system font is needed.
pub fn font() -> &'static str {
    static REGISTER: Once = Once::new();
    REGISTER.call_once(|| {
        // The font is part of the binary; it parses (a test draws text).
        let _ = plotters::style::register_font(FAMILY, FontStyle::Normal, FONT);
    });
    FAMILY
}

fn err(e: impl std::fmt::Display) -> io::Error {
    io::Error::other(format!("plot: {e}"))
}

/// One bar of a stacked bar plot: its label and its segments (ns).
pub struct Bar {
    pub label: String,
    pub parts: Vec<u64>,
}

/// What a plot shows, taken from the model and the summaries.
pub enum Data {
    Stacked {
        title: String,
        series: Vec<(&'static str, RGBColor)>,
        bars: Vec<Bar>,
    },
    Timeline {
        title: String,
        span_ms: f64,
        /// Lane name and how busy it is in each of [`TIMELINE_COLUMNS`]
        /// columns (0 to 1).
        lanes: Vec<(String, RGBColor, Vec<f64>)>,
        /// Where the runs waited for CUDA to start and load the device
        /// code, in ms from the plot's start.
        startup: Vec<(f64, f64)>,
    },
    Sizes {
        title: String,
        /// log2 of the bucket's smallest size, transfers, bytes, ns.
        buckets: Vec<(u32, u64, u64, u64)>,
    },
}

/// The data of one plot.
pub fn data(plot: Plot, merged: &MergedSummary, runs: &[RunInput<'_>]) -> Data {
    match plot {
        Plot::Lines => lines(merged),
        Plot::Ranks => ranks(merged),
        Plot::Sizes => sizes(runs),
        Plot::Timeline => timeline(runs),
    }
}

fn base(file: &str) -> &str {
    std::path::Path::new(file)
        .file_name()
        .and_then(|f| f.to_str())
        .unwrap_or(file)
}

/// Time per line: kernel device time, copyin and copyout time, and host
/// time beyond those (the host's own share of the line's constructs).
fn lines(m: &MergedSummary) -> Data {
    let mut bars: Vec<(u64, Bar)> = Vec::new();
    for f in &m.merged.functions {
        for l in &f.lines {
            let kernel = l.kernel_ns();
            let dir = |d: CopyKind| -> u64 {
                l.transfers
                    .iter()
                    .filter(|t| t.direction == Some(d))
                    .map(|t| t.time.total_ns)
                    .sum()
            };
            let (cin, cout) = (dir(CopyKind::HostToDevice), dir(CopyKind::DeviceToHost));
            let host = l.host_ns.saturating_sub(kernel + cin + cout);
            // A site without a line is told apart by its address, as the
            // text summary does.
            let label = match (l.line, l.address) {
                (Some(n), _) => format!("{}:{n}", base(&f.file)),
                (None, Some(a)) => format!("{} {a:#x}", base(&f.file)),
                (None, None) => format!("{} {}", base(&f.file), f.function),
            };
            let total = kernel + cin + cout + host;
            bars.push((
                total,
                Bar {
                    label,
                    parts: vec![kernel, cin, cout, host],
                },
            ));
        }
    }
    bars.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.label.cmp(&b.1.label)));
    bars.truncate(MAX_LINES);
    Data::Stacked {
        title: "time per source line".to_string(),
        series: vec![
            ("kernel", KERNEL),
            ("copyin", COPYIN),
            ("copyout", COPYOUT),
            ("host", HOST),
        ],
        bars: bars.into_iter().map(|(_, b)| b).collect(),
    }
}

fn ranks(m: &MergedSummary) -> Data {
    Data::Stacked {
        title: "time per rank".to_string(),
        series: vec![
            ("kernel", KERNEL),
            ("transfers", COPYIN),
            ("host (other)", HOST),
        ],
        bars: m
            .ranks
            .iter()
            .map(|r| Bar {
                label: format!("rank {}", r.rank),
                parts: vec![
                    r.kernel_ns,
                    r.transfer_ns,
                    r.host_construct_ns
                        .saturating_sub(r.kernel_ns + r.transfer_ns),
                ],
            })
            .collect(),
    }
}

fn sizes(runs: &[RunInput<'_>]) -> Data {
    let mut buckets: Vec<(u32, u64, u64, u64)> = (0..64).map(|b| (b, 0, 0, 0)).collect();
    for r in runs {
        for (_, t) in r.run.transfers() {
            if !t.is_host_device() {
                continue;
            }
            let b = 63 - t.bytes.max(1).leading_zeros();
            let e = &mut buckets[b as usize];
            e.1 += 1;
            e.2 = e.2.saturating_add(t.bytes);
            e.3 = e.3.saturating_add(t.duration_ns());
        }
    }
    // Only the sizes that occur: a bar each, not a wide row of empty
    // powers of two between a few bytes and megabytes.
    buckets.retain(|b| b.1 > 0);
    Data::Sizes {
        title: "host<->device transfers by size".to_string(),
        buckets,
    }
}

/// Each track of the runs (`Run::track`: a host thread's top-level
/// constructs and MPI calls, a device queue, a copy direction) with how
/// busy it is in each column (`Run::busy_shares`), and the CUDA start-up
/// of each run (`Ledger::startup_span`).
fn timeline(runs: &[RunInput<'_>]) -> Data {
    use accprof_analyzer::model::{CopyDirection, Track};
    let start = runs
        .iter()
        .map(|r| r.run.process.span_ns.0)
        .min()
        .unwrap_or(0);
    let end = runs
        .iter()
        .map(|r| r.run.process.span_ns.1)
        .max()
        .unwrap_or(0)
        .max(start + 1);
    let span = end - start;
    let ms = |t: u64| t.saturating_sub(start) as f64 / 1e6;
    let many = runs.len() > 1;
    let mut lanes = Vec::new();
    let mut startup = Vec::new();
    for r in runs {
        let run = r.run;
        let who = if many {
            format!("r{} ", r.rank)
        } else {
            String::new()
        };
        for (track, shares) in run.busy_shares(start, end, TIMELINE_COLUMNS) {
            let (name, colour) = match track {
                // Nested constructs run inside the top-level ones.
                Track::Thread { depth: 1.., .. } => continue,
                Track::Thread { thread, .. } => (format!("host {thread}"), HOST),
                Track::Queue { device, stream } => (format!("GPU{device} stream {stream}"), KERNEL),
                Track::Copies(CopyDirection::Upload) => ("copyin".to_string(), COPYIN),
                Track::Copies(CopyDirection::Download) => ("copyout".to_string(), COPYOUT),
                Track::Copies(CopyDirection::Other) => ("other copies".to_string(), HOST),
                Track::Memsets => ("memsets".to_string(), HOST),
            };
            lanes.push((format!("{who}{name}"), colour, shares));
        }
        if let Some((a, b)) = run.ledger().startup_span {
            startup.push((ms(a), ms(b)));
        }
    }
    Data::Timeline {
        title: "timeline".to_string(),
        span_ms: span as f64 / 1e6,
        lanes,
        startup,
    }
}

/// Shading of the start-up span, and its label.
const STARTUP: RGBColor = RGBColor(232, 232, 232);
pub const STARTUP_LABEL: &str = "CUDA start-up and code loading";

/// The busy columns of a lane as runs of equal shade (in eighths, as the
/// terminal timeline draws them): one rectangle per run, not per column.
fn shades(shares: &[f64]) -> impl Iterator<Item = (Range<usize>, f64)> + '_ {
    let eighths = |s: f64| (s * 8.0).ceil().clamp(0.0, 8.0) as u8;
    let mut i = 0;
    std::iter::from_fn(move || {
        while i < shares.len() && eighths(shares[i]) == 0 {
            i += 1;
        }
        if i >= shares.len() {
            return None;
        }
        let (s, e) = (i, eighths(shares[i]));
        while i < shares.len() && eighths(shares[i]) == e {
            i += 1;
        }
        Some((s..i, f64::from(e) / 8.0))
    })
}

fn height(d: &Data) -> u32 {
    match d {
        Data::Stacked { bars, .. } => 140 + 28 * bars.len().max(1) as u32,
        Data::Timeline { lanes, .. } => 120 + 30 * lanes.len().max(1) as u32,
        Data::Sizes { .. } => 600,
    }
}

/// The plot's outer margin, and the room for the row labels of the bar
/// plots and of the sizes plot's count axis.
const MARGIN: u32 = 12;
const ROW_LABELS: u32 = 220;
const COUNT_LABELS: u32 = 70;
/// Label text size; the built-in font is monospaced, each glyph
/// `GLYPH_EM` of the size wide.
const LABEL_PX: u32 = 13;
const SMALL_PX: u32 = 11;
pub const GLYPH_EM: f64 = 0.602;

/// How wide `text` is drawn at `px`, in pixels.
fn text_px(text: &str, px: u32) -> f64 {
    text.chars().count() as f64 * px as f64 * GLYPH_EM
}

/// `n` rows, two units each, labelled at their middles: every row has its
/// label, even one alone (a segmented `0..0` has no extent to draw in).
fn rows(n: usize) -> WithKeyPoints<RangedCoordi32> {
    let n = n.max(1) as i32;
    (0..2 * n).with_key_points((0..n).map(|i| 2 * i + 1).collect())
}

/// The row a label's key point (a row's middle) stands for.
fn row_of(v: i32) -> usize {
    (v.max(0) / 2) as usize
}

fn draw<DB: DrawingBackend>(area: DrawingArea<DB, Shift>, d: &Data) -> io::Result<()>
where
    DB::ErrorType: 'static,
{
    let f = font();
    area.fill(&WHITE).map_err(err)?;
    match d {
        Data::Stacked {
            title,
            series,
            bars,
        } => {
            let max_ms = bars
                .iter()
                .map(|b| b.parts.iter().sum::<u64>())
                .max()
                .unwrap_or(0) as f64
                / 1e6;
            let n = bars.len().max(1);
            // The first bar on top; room on the right for the legend.
            let row = |i: usize| 2 * (n - 1 - i) as i32;
            let mut chart = ChartBuilder::on(&area)
                .caption(title, (f, 20))
                .margin(MARGIN)
                .x_label_area_size(40)
                .y_label_area_size(ROW_LABELS)
                .build_cartesian_2d(0f64..(max_ms * 1.3).max(1e-3), rows(n))
                .map_err(err)?;
            let labels: Vec<&str> = bars.iter().map(|b| b.label.as_str()).collect();
            chart
                .configure_mesh()
                .disable_y_mesh()
                .x_desc("time (ms)")
                .label_style((f, LABEL_PX))
                .y_label_formatter(&|v: &i32| {
                    labels
                        .get(n - 1 - row_of(*v).min(n - 1))
                        .map(|s| s.to_string())
                        .unwrap_or_default()
                })
                .draw()
                .map_err(err)?;
            for (si, (name, colour)) in series.iter().enumerate() {
                let rects = bars.iter().enumerate().filter_map(|(i, b)| {
                    let before: u64 = b.parts[..si].iter().sum();
                    let v = b.parts[si];
                    (v > 0).then(|| {
                        let x0 = before as f64 / 1e6;
                        let x1 = (before + v) as f64 / 1e6;
                        let y = row(i);
                        let mut r = Rectangle::new([(x0, y + 2), (x1, y)], colour.filled());
                        r.set_margin(4, 4, 0, 0);
                        r
                    })
                });
                let colour = *colour;
                chart
                    .draw_series(rects)
                    .map_err(err)?
                    .label(*name)
                    .legend(move |(x, y)| {
                        Rectangle::new([(x, y - 5), (x + 10, y + 5)], colour.filled())
                    });
            }
            // Each bar's total at its end: bars orders of magnitude
            // shorter than the longest still say what they are.
            let total_style = (f, SMALL_PX).into_font().color(&BLACK).pos(
                plotters::style::text_anchor::Pos::new(
                    plotters::style::text_anchor::HPos::Left,
                    plotters::style::text_anchor::VPos::Center,
                ),
            );
            chart
                .draw_series(bars.iter().enumerate().map(|(i, b)| {
                    let total: u64 = b.parts.iter().sum();
                    Text::new(
                        format!(" {}", accprof_analyzer::units::duration_ns(total)),
                        (total as f64 / 1e6, row(i) + 1),
                        total_style.clone(),
                    )
                }))
                .map_err(err)?;
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::LowerRight)
                .label_font((f, LABEL_PX))
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .draw()
                .map_err(err)?;
        }
        Data::Timeline {
            title,
            span_ms,
            lanes,
            startup,
        } => {
            let n = lanes.len().max(1);
            let mut chart = ChartBuilder::on(&area)
                .caption(title, (f, 20))
                .margin(MARGIN)
                .x_label_area_size(40)
                .y_label_area_size(ROW_LABELS)
                .build_cartesian_2d(0f64..span_ms.max(1e-3), rows(n))
                .map_err(err)?;
            let labels: Vec<&str> = lanes.iter().map(|l| l.0.as_str()).collect();
            chart
                .configure_mesh()
                .disable_y_mesh()
                .x_desc("time (ms)")
                .label_style((f, LABEL_PX))
                .y_label_formatter(&|v: &i32| {
                    labels
                        .get(n - 1 - row_of(*v).min(n - 1))
                        .map(|s| s.to_string())
                        .unwrap_or_default()
                })
                .draw()
                .map_err(err)?;
            // CUDA's start-up behind the lanes, said in words over them.
            let top = 2 * n as i32;
            for &(a, b) in startup {
                chart
                    .draw_series([Rectangle::new([(a, top), (b, 0)], STARTUP.filled())])
                    .map_err(err)?;
                chart
                    .draw_series([Text::new(
                        STARTUP_LABEL.to_string(),
                        (a, top),
                        (f, SMALL_PX).into_font().color(&BLACK),
                    )])
                    .map_err(err)?;
            }
            let per_col = span_ms / TIMELINE_COLUMNS as f64;
            for (i, (_, colour, shares)) in lanes.iter().enumerate() {
                // The first lane on top; each column as dark as the lane
                // was busy there, a busy one never lost.
                let y = 2 * (n - 1 - i) as i32;
                chart
                    .draw_series(shades(shares).map(|(cols, share)| {
                        let mut rect = Rectangle::new(
                            [
                                (cols.start as f64 * per_col, y + 2),
                                (cols.end as f64 * per_col, y),
                            ],
                            colour.mix(0.15 + 0.85 * share).filled(),
                        );
                        rect.set_margin(4, 4, 0, 0);
                        rect
                    }))
                    .map_err(err)?;
            }
        }
        Data::Sizes { title, buckets } => sizes_chart(&area, title, buckets)?,
    }
    area.present().map_err(err)
}

/// One bar per transfer size that occurs, its count up, its bandwidth
/// written above it. Labels that would not fit their bar's width side by
/// side are turned upright.
fn sizes_chart<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    title: &str,
    buckets: &[(u32, u64, u64, u64)],
) -> io::Result<()>
where
    DB::ErrorType: 'static,
{
    use plotters::style::text_anchor::{HPos, Pos, VPos};
    let f = font();
    if buckets.is_empty() {
        let (w, h) = area.dim_in_pixel();
        area.draw(&Text::new(
            title.to_string(),
            (w as i32 / 2, MARGIN as i32),
            (f, 20)
                .into_font()
                .color(&BLACK)
                .pos(Pos::new(HPos::Center, VPos::Top)),
        ))
        .map_err(err)?;
        area.draw(&Text::new(
            "no host<->device transfers".to_string(),
            (w as i32 / 2, h as i32 / 2),
            (f, LABEL_PX)
                .into_font()
                .color(&BLACK)
                .pos(Pos::new(HPos::Center, VPos::Center)),
        ))
        .map_err(err)?;
        return Ok(());
    }
    let n = buckets.len();
    let names: Vec<String> = buckets
        .iter()
        .map(|b| accprof_analyzer::units::bytes(1u64 << b.0.min(63)))
        .collect();
    let rates: Vec<String> = buckets
        .iter()
        .map(|b| accprof_analyzer::units::rate(b.2, b.3).unwrap_or_else(|| "-".to_string()))
        .collect();
    let widest = |v: &[String], px| v.iter().map(|s| text_px(s, px)).fold(0.0, f64::max);
    let (w, _) = area.dim_in_pixel();
    let slot = (f64::from(w) - f64::from(2 * MARGIN + COUNT_LABELS)) / n as f64;
    // Side by side, each label keeps a few pixels from the next.
    let upright_names = widest(&names, LABEL_PX) > slot - 6.0;
    let upright_rates = widest(&rates, SMALL_PX) > slot - 6.0;
    let name_room = if upright_names {
        widest(&names, LABEL_PX) as u32 + 40
    } else {
        50
    };
    let max = buckets.iter().map(|b| b.1).max().unwrap_or(1).max(1);
    // Headroom above the tallest bar for its rate.
    let top = if upright_rates {
        max + max / 3 + 1
    } else {
        max + max / 5 + 1
    };
    let mut chart = ChartBuilder::on(area)
        .caption(title, (f, 20))
        .margin(MARGIN)
        .x_label_area_size(name_room)
        .y_label_area_size(COUNT_LABELS)
        .build_cartesian_2d(rows(n), 0u64..top)
        .map_err(err)?;
    // The axis draws its labels centred on their ticks, upright ones too
    // (half of each above the axis): upright names are drawn here instead,
    // each starting below its tick.
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_desc("transfer size (at least); bandwidth above each bar")
        .y_desc("transfers")
        .label_style((f, LABEL_PX))
        .axis_desc_style((f, LABEL_PX))
        .x_label_formatter(&|v: &i32| {
            if upright_names {
                String::new()
            } else {
                names.get(row_of(*v)).cloned().unwrap_or_default()
            }
        })
        .draw()
        .map_err(err)?;
    if upright_names {
        let style = (f, LABEL_PX)
            .into_font()
            .transform(FontTransform::Rotate90)
            .color(&BLACK)
            .pos(Pos::new(HPos::Left, VPos::Center));
        for (i, name) in names.iter().enumerate() {
            let (x, y) = chart.backend_coord(&(2 * i as i32 + 1, 0));
            area.draw(&Text::new(name.clone(), (x, y + 8), style.clone()))
                .map_err(err)?;
        }
    }
    chart
        .draw_series(buckets.iter().enumerate().map(|(i, b)| {
            let x = 2 * i as i32;
            let mut r = Rectangle::new([(x, 0), (x + 2, b.1)], COPYIN.filled());
            r.set_margin(0, 0, 4, 4);
            r
        }))
        .map_err(err)?;
    let rate_style = if upright_rates {
        (f, SMALL_PX)
            .into_font()
            .color(&BLACK)
            .transform(FontTransform::Rotate270)
            .pos(Pos::new(HPos::Left, VPos::Center))
    } else {
        (f, SMALL_PX)
            .into_font()
            .color(&BLACK)
            .pos(Pos::new(HPos::Center, VPos::Bottom))
    };
    chart
        .draw_series(
            buckets.iter().zip(&rates).enumerate().map(|(i, (b, r))| {
                Text::new(r.clone(), (2 * i as i32 + 1, b.1), rate_style.clone())
            }),
        )
        .map_err(err)?;
    Ok(())
}

/// The bitmap backend with text drawn glyph by glyph. plotters' ab_glyph
/// text puts each glyph's ink at its pen position, leaving out the glyph's
/// left bearing, so narrow glyphs lean on the one before them ("0. 0",
/// "( ms)"). The font is monospaced: each glyph's ink is centred in its
/// cell of the text's width instead.
struct Glyphs<'a>(BitMapBackend<'a>);

type BitMapError = <BitMapBackend<'static> as DrawingBackend>::ErrorType;

impl DrawingBackend for Glyphs<'_> {
    type ErrorType = BitMapError;

    fn get_size(&self) -> (u32, u32) {
        self.0.get_size()
    }

    fn ensure_prepared(&mut self) -> Result<(), DrawingErrorKind<BitMapError>> {
        self.0.ensure_prepared()
    }

    fn present(&mut self) -> Result<(), DrawingErrorKind<BitMapError>> {
        self.0.present()
    }

    fn draw_pixel(
        &mut self,
        point: BackendCoord,
        color: BackendColor,
    ) -> Result<(), DrawingErrorKind<BitMapError>> {
        self.0.draw_pixel(point, color)
    }

    fn draw_line<S: BackendStyle>(
        &mut self,
        from: BackendCoord,
        to: BackendCoord,
        style: &S,
    ) -> Result<(), DrawingErrorKind<BitMapError>> {
        self.0.draw_line(from, to, style)
    }

    fn draw_rect<S: BackendStyle>(
        &mut self,
        upper_left: BackendCoord,
        bottom_right: BackendCoord,
        style: &S,
        fill: bool,
    ) -> Result<(), DrawingErrorKind<BitMapError>> {
        self.0.draw_rect(upper_left, bottom_right, style, fill)
    }

    fn fill_polygon<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        vert: I,
        style: &S,
    ) -> Result<(), DrawingErrorKind<BitMapError>> {
        self.0.fill_polygon(vert, style)
    }

    fn blit_bitmap(
        &mut self,
        pos: BackendCoord,
        size: (u32, u32),
        src: &[u8],
    ) -> Result<(), DrawingErrorKind<BitMapError>> {
        self.0.blit_bitmap(pos, size, src)
    }

    fn draw_text<TStyle: BackendTextStyle>(
        &mut self,
        text: &str,
        style: &TStyle,
        pos: BackendCoord,
    ) -> Result<(), DrawingErrorKind<BitMapError>> {
        use plotters_backend::text_anchor::{HPos, VPos};
        let font_err = |e: TStyle::FontError| DrawingErrorKind::FontError(Box::new(e));
        if style.color().alpha == 0.0 {
            return Ok(());
        }
        let ((min_x, min_y), (max_x, max_y)) = style.layout_box(text).map_err(font_err)?;
        let (width, height) = (max_x - min_x, max_y - min_y);
        // Where the text's box starts, as plotters places it.
        let dx = match style.anchor().h_pos {
            HPos::Left => 0,
            HPos::Right => -width,
            HPos::Center => -width / 2,
        } - min_x;
        let dy = match style.anchor().v_pos {
            VPos::Top => 0,
            VPos::Center => -height / 2,
            VPos::Bottom => -height,
        } - min_y;
        let n = text.chars().count().max(1);
        let cell = f64::from(width) / n as f64;
        let trans = style.transform();
        let (w, h) = self.get_size();
        let mut glyph = [0u8; 4];
        let mut ink: Vec<(i32, i32, BackendColor)> = Vec::new();
        for (i, c) in text.chars().enumerate() {
            ink.clear();
            style
                .draw(c.encode_utf8(&mut glyph), (0, 0), |x, y, colour| {
                    ink.push((x, y, colour));
                    Ok::<(), ()>(())
                })
                .map_err(font_err)?
                .ok();
            let (Some(lo), Some(hi)) =
                (ink.iter().map(|p| p.0).min(), ink.iter().map(|p| p.0).max())
            else {
                continue;
            };
            let left = i as f64 * cell + (cell - f64::from(hi - lo + 1)) / 2.0;
            let shift = left.round() as i32 - lo;
            for &(x, y, colour) in &ink {
                let (x, y) = trans.transform(x + shift + dx, y + dy);
                let (x, y) = (pos.0 + x, pos.1 + y);
                if x >= 0 && x < w as i32 && y >= 0 && y < h as i32 {
                    self.0.draw_pixel((x, y), colour)?;
                }
            }
        }
        Ok(())
    }

    fn estimate_text_size<TStyle: BackendTextStyle>(
        &self,
        text: &str,
        style: &TStyle,
    ) -> Result<(u32, u32), DrawingErrorKind<BitMapError>> {
        self.0.estimate_text_size(text, style)
    }
}

/// The plot as an SVG document or PNG file.
pub fn render(d: &Data, image: Image) -> io::Result<Vec<u8>> {
    let h = height(d);
    match image {
        Image::Svg => {
            let mut s = String::new();
            {
                let area = SVGBackend::with_string(&mut s, (WIDTH, h)).into_drawing_area();
                draw(area, d)?;
            }
            Ok(s.into_bytes())
        }
        Image::Png => {
            let mut pixels = vec![0u8; (WIDTH * h * 3) as usize];
            {
                let area =
                    Glyphs(BitMapBackend::with_buffer(&mut pixels, (WIDTH, h))).into_drawing_area();
                draw(area, d)?;
            }
            let mut out = Vec::new();
            {
                let mut enc = png::Encoder::new(&mut out, WIDTH, h);
                enc.set_color(png::ColorType::Rgb);
                enc.set_depth(png::BitDepth::Eight);
                let mut w = enc.write_header().map_err(err)?;
                w.write_image_data(&pixels).map_err(err)?;
            }
            Ok(out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A text of an SVG plot: its string, where it is drawn across (left
    /// and right edge, in pixels) and its baseline.
    #[derive(Debug)]
    struct Label {
        text: String,
        left: f64,
        right: f64,
        y: f64,
    }

    /// Every text of the SVG, placed as the built-in monospaced font draws
    /// it: `GLYPH_EM` of the font size per character, from its anchor; a
    /// text turned upright takes its font size across.
    fn labels(svg: &str) -> Vec<Label> {
        let doc = roxmltree::Document::parse(svg).expect("SVG is XML");
        doc.descendants()
            .filter(|n| n.has_tag_name("text"))
            .map(|n| {
                let num = |a: &str| n.attribute(a).and_then(|v| v.parse::<f64>().ok());
                let text = n.text().unwrap_or("").trim().to_string();
                let (x, y) = (num("x").expect("x"), num("y").expect("y"));
                let size = num("font-size").expect("font-size");
                let across = if n.attribute("transform").is_some() {
                    size
                } else {
                    text.chars().count() as f64 * size * GLYPH_EM
                };
                let left = match n.attribute("text-anchor") {
                    Some("middle") => x - across / 2.0,
                    Some("end") => x - across,
                    _ => x,
                };
                Label {
                    text,
                    left,
                    right: left + across,
                    y,
                }
            })
            .collect()
    }

    /// No two of `labels` on one row (the same baseline, or both
    /// upright) overlap.
    fn apart(labels: &[&Label]) {
        let mut v: Vec<&&Label> = labels.iter().collect();
        v.sort_by(|a, b| a.left.total_cmp(&b.left));
        for w in v.windows(2) {
            assert!(w[0].right <= w[1].left, "{:?} overlaps {:?}", w[0], w[1]);
        }
    }

    fn svg(d: &Data) -> String {
        String::from_utf8(render(d, Image::Svg).expect("render")).expect("utf-8")
    }

    fn rects(svg: &str, fill: &str) -> Vec<(f64, f64, f64, f64)> {
        let doc = roxmltree::Document::parse(svg).expect("SVG is XML");
        doc.descendants()
            .filter(|n| n.has_tag_name("rect") && n.attribute("fill") == Some(fill))
            .map(|n| {
                let num = |a: &str| n.attribute(a).and_then(|v| v.parse().ok()).expect(a);
                (num("x"), num("y"), num("width"), num("height"))
            })
            .collect()
    }

    #[test]
    fn one_bar_fills_its_row_beside_its_label() {
        let d = Data::Stacked {
            title: "time per source line".into(),
            series: vec![("kernel", KERNEL), ("host", HOST)],
            bars: vec![Bar {
                label: "a.c:12".into(),
                parts: vec![3_000_000, 1_000_000],
            }],
        };
        let s = svg(&d);
        let label = labels(&s)
            .into_iter()
            .find(|l| l.text == "a.c:12")
            .expect("the bar's label");
        // The kernel segment and the legend's kernel box.
        let bar = rects(&s, "#1F77B4")
            .into_iter()
            .max_by(|a, b| a.3.total_cmp(&b.3))
            .expect("bar");
        let plot = height(&d) as f64 - 140.0;
        assert!(bar.3 >= plot * 0.6, "bar {bar:?} of a {plot} px row");
        assert!(
            bar.1 < label.y && label.y < bar.1 + bar.3,
            "label {label:?} beside bar {bar:?}"
        );
        // The bar's total at its end.
        let total = labels(&s)
            .into_iter()
            .find(|l| l.text == "4.00 ms")
            .expect("the bar's total");
        assert!(total.left >= bar.0 + bar.2 - 1.0, "{total:?} after {bar:?}");
    }

    #[test]
    fn the_first_lane_of_a_timeline_is_on_top() {
        let busy = |cols: Range<usize>| {
            let mut v = vec![0.0; TIMELINE_COLUMNS];
            v[cols].fill(1.0);
            v
        };
        let d = Data::Timeline {
            title: "timeline".into(),
            span_ms: 1.0,
            lanes: vec![
                ("host 1".into(), HOST, busy(0..10)),
                ("GPU0 stream 7".into(), KERNEL, busy(5..8)),
            ],
            startup: Vec::new(),
        };
        let all = labels(&svg(&d));
        let y = |name: &str| all.iter().find(|l| l.text == name).expect(name).y;
        assert!(y("host 1") < y("GPU0 stream 7"), "{all:?}");
    }

    fn buckets(sizes: std::ops::Range<u32>) -> Data {
        Data::Sizes {
            title: "sizes".into(),
            buckets: sizes
                .map(|b| (b, 10 + u64::from(b), 1000 << b, 3000 + 7 * u64::from(b)))
                .collect(),
        }
    }

    #[test]
    fn size_and_bandwidth_labels_never_overlap() {
        // Five sizes side by side, forty upright.
        for sizes in [2..7, 2..42] {
            let s = svg(&buckets(sizes.clone()));
            let all = labels(&s);
            let names: Vec<&Label> = all
                .iter()
                .filter(|l| l.text.ends_with(" B") || l.text.ends_with("iB"))
                .collect();
            let rates: Vec<&Label> = all.iter().filter(|l| l.text.ends_with("B/s")).collect();
            assert_eq!(names.len(), sizes.len(), "{sizes:?}");
            assert_eq!(rates.len(), sizes.len(), "{sizes:?}");
            apart(&names);
            // The rates stand at their bars' heights, which rise: any two
            // may meet across.
            apart(&rates);
        }
    }

    /// The runs of inked pixel columns of `text` drawn at 20 px on a
    /// white bitmap through `Glyphs`: (first, last) column of each.
    fn ink_runs(text: &str) -> Vec<(usize, usize)> {
        let (w, h) = (200u32, 40u32);
        let mut pixels = vec![255u8; (w * h * 3) as usize];
        {
            let area = Glyphs(BitMapBackend::with_buffer(&mut pixels, (w, h))).into_drawing_area();
            area.draw(&Text::new(
                text.to_string(),
                (10, 10),
                (font(), 20).into_font().color(&BLACK),
            ))
            .expect("draw");
            area.present().expect("present");
        }
        let inked = |x: u32| (0..h).any(|y| pixels[((y * w + x) * 3) as usize] < 128);
        let mut runs: Vec<(usize, usize)> = Vec::new();
        for x in 0..w {
            if inked(x) {
                match runs.last_mut() {
                    Some(r) if r.1 + 1 == x as usize => r.1 = x as usize,
                    _ => runs.push((x as usize, x as usize)),
                }
            }
        }
        runs
    }

    #[test]
    fn a_narrow_glyph_sits_in_the_middle_of_its_cell() {
        // "0.0": the point halfway between the digits, not against the
        // first (plotters' own text left out each glyph's bearing).
        let runs = ink_runs("0.0");
        assert_eq!(runs.len(), 3, "{runs:?}");
        let before = runs[1].0 - runs[0].1;
        let after = runs[2].0 - runs[1].1;
        assert!(before.abs_diff(after) <= 1, "{runs:?}");
        // And the cells are the font's: "00" is as wide as two of them.
        let two = ink_runs("0 0");
        assert_eq!(
            two[1].0 - two[0].0,
            runs[2].0 - runs[0].0,
            "{two:?} {runs:?}"
        );
    }

    #[test]
    fn a_run_without_transfers_says_so() {
        let s = svg(&buckets(0..0));
        assert!(s.contains("no host&lt;-&gt;device transfers"), "{s}");
        let png = render(&buckets(0..0), Image::Png).expect("render");
        let dec = png::Decoder::new(png.as_slice());
        let reader = dec.read_info().expect("a PNG");
        assert_eq!((reader.info().width, reader.info().height), (WIDTH, 600));
    }
}
