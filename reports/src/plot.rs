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

use plotters::coord::ranged1d::SegmentValue;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::FontStyle;

use accprof_analyzer::summary::MergedSummary;
use accprof_trace::CopyKind;

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
        /// Lane name and its busy column ranges.
        lanes: Vec<(String, RGBColor, Vec<Range<usize>>)>,
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
            let kernel: u64 = l.kernels.iter().map(|k| k.device.total_ns).sum();
            let dir = |d: CopyKind| -> u64 {
                l.transfers
                    .iter()
                    .filter(|t| t.direction == Some(d))
                    .map(|t| t.time.total_ns)
                    .sum()
            };
            let (cin, cout) = (dir(CopyKind::HostToDevice), dir(CopyKind::DeviceToHost));
            let host = l.host_ns.saturating_sub(kernel + cin + cout);
            let label = match l.line {
                Some(n) => format!("{}:{n}", base(&f.file)),
                None => format!("{} {}", base(&f.file), f.function),
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
    let first = buckets.iter().position(|b| b.1 > 0).unwrap_or(0);
    let last = buckets.iter().rposition(|b| b.1 > 0).unwrap_or(0);
    Data::Sizes {
        title: "host<->device transfers by size".to_string(),
        buckets: buckets[first..=last].to_vec(),
    }
}

/// Busy columns of each lane: an event marks every column it touches, so
/// any number of events draws as at most one rectangle per busy stretch.
fn timeline(runs: &[RunInput<'_>]) -> Data {
    let start = runs.iter().map(|r| r.run.span_ns.0).min().unwrap_or(0);
    let end = runs
        .iter()
        .map(|r| r.run.span_ns.1)
        .max()
        .unwrap_or(0)
        .max(start + 1);
    let span = end - start;
    let col = |t: u64| -> usize {
        ((t.saturating_sub(start) as u128 * TIMELINE_COLUMNS as u128 / span as u128) as usize)
            .min(TIMELINE_COLUMNS - 1)
    };
    type Lane = (String, RGBColor, Vec<bool>);
    let mut lanes: Vec<Lane> = Vec::new();
    let mut mark = |name: String, colour: RGBColor, a: u64, b: u64| {
        let i = match lanes.iter().position(|l| l.0 == name) {
            Some(i) => i,
            None => {
                lanes.push((name, colour, vec![false; TIMELINE_COLUMNS]));
                lanes.len() - 1
            }
        };
        for c in &mut lanes[i].2[col(a)..=col(b.max(a))] {
            *c = true;
        }
    };
    let many = runs.len() > 1;
    for r in runs {
        let run = r.run;
        let who = if many {
            format!("r{} ", r.rank)
        } else {
            String::new()
        };
        for (_, c) in run.constructs() {
            if c.parent.is_none() {
                let e = c.end_ns().unwrap_or(run.span_ns.1);
                mark(format!("{who}host {}", c.thread), HOST, c.start_ns, e);
            }
        }
        for (_, k) in run.kernels() {
            mark(
                format!("{who}GPU{} stream {}", k.device, k.stream),
                KERNEL,
                k.start_ns,
                k.end_ns,
            );
        }
        for (_, t) in run.transfers() {
            let (name, colour) = match t.kind {
                CopyKind::HostToDevice => ("copyin", COPYIN),
                CopyKind::DeviceToHost => ("copyout", COPYOUT),
                _ => ("other copies", HOST),
            };
            mark(format!("{who}{name}"), colour, t.start_ns, t.end_ns);
        }
    }
    let lanes = lanes
        .into_iter()
        .map(|(name, colour, cols)| {
            let mut runs = Vec::new();
            let mut i = 0;
            while i < cols.len() {
                if cols[i] {
                    let s = i;
                    while i < cols.len() && cols[i] {
                        i += 1;
                    }
                    runs.push(s..i);
                } else {
                    i += 1;
                }
            }
            (name, colour, runs)
        })
        .collect();
    Data::Timeline {
        title: "timeline".to_string(),
        span_ms: span as f64 / 1e6,
        lanes,
    }
}

fn height(d: &Data) -> u32 {
    match d {
        Data::Stacked { bars, .. } => 140 + 28 * bars.len().max(1) as u32,
        Data::Timeline { lanes, .. } => 120 + 30 * lanes.len().max(1) as u32,
        Data::Sizes { .. } => 600,
    }
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
            let n = bars.len().max(1) as i32;
            // The first bar on top; room on the right for the legend.
            let row = |i: usize| n - 1 - i as i32;
            let mut chart = ChartBuilder::on(&area)
                .caption(title, (f, 20))
                .margin(12)
                .x_label_area_size(40)
                .y_label_area_size(220)
                .build_cartesian_2d(0f64..(max_ms * 1.3).max(1e-3), (0..n - 1).into_segmented())
                .map_err(err)?;
            let labels: Vec<&str> = bars.iter().map(|b| b.label.as_str()).collect();
            chart
                .configure_mesh()
                .disable_y_mesh()
                .x_desc("time (ms)")
                .label_style((f, 13))
                .y_labels(bars.len().max(1))
                .y_label_formatter(&|v: &SegmentValue<i32>| match v {
                    SegmentValue::CenterOf(i) if *i < n => labels
                        .get((n - 1 - *i) as usize)
                        .map(|s| s.to_string())
                        .unwrap_or_default(),
                    _ => String::new(),
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
                        let i = row(i);
                        let mut r = Rectangle::new(
                            [
                                (x0, SegmentValue::Exact(i)),
                                (x1, SegmentValue::Exact(i + 1)),
                            ],
                            colour.filled(),
                        );
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
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::LowerRight)
                .label_font((f, 13))
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .draw()
                .map_err(err)?;
        }
        Data::Timeline {
            title,
            span_ms,
            lanes,
        } => {
            let n = lanes.len().max(1) as i32;
            let mut chart = ChartBuilder::on(&area)
                .caption(title, (f, 20))
                .margin(12)
                .x_label_area_size(40)
                .y_label_area_size(220)
                .build_cartesian_2d(0f64..span_ms.max(1e-3), (0..n - 1).into_segmented())
                .map_err(err)?;
            let labels: Vec<&str> = lanes.iter().map(|l| l.0.as_str()).collect();
            chart
                .configure_mesh()
                .disable_y_mesh()
                .x_desc("time (ms)")
                .label_style((f, 13))
                .y_labels(lanes.len().max(1))
                .y_label_formatter(&|v: &SegmentValue<i32>| match v {
                    SegmentValue::CenterOf(i) => labels
                        .get(*i as usize)
                        .map(|s| s.to_string())
                        .unwrap_or_default(),
                    _ => String::new(),
                })
                .draw()
                .map_err(err)?;
            let per_col = span_ms / TIMELINE_COLUMNS as f64;
            for (i, (_, colour, runs)) in lanes.iter().enumerate() {
                let i = i as i32;
                chart
                    .draw_series(runs.iter().map(|r| {
                        let mut rect = Rectangle::new(
                            [
                                (r.start as f64 * per_col, SegmentValue::Exact(i)),
                                (r.end as f64 * per_col, SegmentValue::Exact(i + 1)),
                            ],
                            colour.filled(),
                        );
                        rect.set_margin(4, 4, 0, 0);
                        rect
                    }))
                    .map_err(err)?;
            }
        }
        Data::Sizes { title, buckets } => {
            let n = buckets.len().max(1) as i32;
            let max = buckets.iter().map(|b| b.1).max().unwrap_or(1).max(1);
            let mut chart = ChartBuilder::on(&area)
                .caption(title, (f, 20))
                .margin(12)
                .x_label_area_size(50)
                .y_label_area_size(70)
                .build_cartesian_2d((0..n - 1).into_segmented(), 0u64..(max + max / 5 + 1))
                .map_err(err)?;
            let names: Vec<String> = buckets
                .iter()
                .map(|b| accprof_analyzer::units::bytes(1u64 << b.0.min(63)))
                .collect();
            chart
                .configure_mesh()
                .disable_x_mesh()
                .x_desc("transfer size (at least)")
                .y_desc("transfers")
                .label_style((f, 12))
                .x_labels(buckets.len().max(1))
                .x_label_formatter(&|v: &SegmentValue<i32>| match v {
                    SegmentValue::CenterOf(i) => {
                        names.get(*i as usize).cloned().unwrap_or_default()
                    }
                    _ => String::new(),
                })
                .draw()
                .map_err(err)?;
            chart
                .draw_series(
                    buckets
                        .iter()
                        .enumerate()
                        .filter(|(_, b)| b.1 > 0)
                        .map(|(i, b)| {
                            let i = i as i32;
                            let mut r = Rectangle::new(
                                [
                                    (SegmentValue::Exact(i), 0),
                                    (SegmentValue::Exact(i + 1), b.1),
                                ],
                                COPYIN.filled(),
                            );
                            r.set_margin(0, 0, 4, 4);
                            r
                        }),
                )
                .map_err(err)?;
            // Bandwidth of each size above its bar.
            chart
                .draw_series(
                    buckets
                        .iter()
                        .enumerate()
                        .filter(|(_, b)| b.1 > 0)
                        .map(|(i, b)| {
                            let gbps = if b.3 == 0 {
                                "-".to_string()
                            } else {
                                format!("{:.2} GB/s", b.2 as f64 / b.3 as f64)
                            };
                            Text::new(
                                gbps,
                                (SegmentValue::CenterOf(i as i32), b.1),
                                (f, 11).into_font().color(&BLACK).pos(
                                    plotters::style::text_anchor::Pos::new(
                                        plotters::style::text_anchor::HPos::Center,
                                        plotters::style::text_anchor::VPos::Bottom,
                                    ),
                                ),
                            )
                        }),
                )
                .map_err(err)?;
        }
    }
    area.present().map_err(err)
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
                let area = BitMapBackend::with_buffer(&mut pixels, (WIDTH, h)).into_drawing_area();
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
