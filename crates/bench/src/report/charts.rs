//! The charts, each drawn once per backend (PNG bitmap, SVG).

use super::inputs::{slug, Bigtable, Breakdown, Results, Ycsb};
use plotters::coord::Shift;
use plotters::prelude::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const SIZE: (u32, u32) = (960, 560);
const FONT: &str = "sans-serif";
/// Axis and legend text. Even: plotters' glyph placement (its ab_glyph text) puts each glyph
/// at half the font size plus its top, truncated, so at odd sizes small glyphs ('.', ':',
/// ',') came out a pixel or two above the baseline ("127·0·0·1").
const LABEL_SIZE: u32 = 14;

/// Something drawable on any plotters backend.
trait Chart {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String>;
}

fn err(e: impl std::fmt::Display) -> String {
    format!("drawing failed: {e}")
}

/// Makes DejaVu Sans plotters' sans-serif font (once per process).
fn register_font() -> Result<(), String> {
    static REGISTERED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let ok = *REGISTERED.get_or_init(|| {
        plotters::style::register_font(FONT, FontStyle::Normal, dejavu::sans::regular()).is_ok()
    });
    if ok {
        Ok(())
    } else {
        Err("the embedded DejaVu Sans font could not be loaded".into())
    }
}

/// Writes every chart the results allow; the files written.
pub fn write_all(results: &Results, out: &Path) -> Result<Vec<PathBuf>, String> {
    register_font()?;
    let mut written = Vec::new();
    if !results.ycsb.is_empty() {
        render(
            out,
            "ycsb-throughput",
            &Throughput(&results.ycsb),
            &mut written,
        )?;
    }
    for y in results.ycsb.iter().filter(|y| !y.latencies.is_empty()) {
        let name = format!(
            "ycsb-latency-{}-{}-{}-t{}",
            slug(&y.workload),
            slug(&y.phase),
            slug(&y.db),
            y.threads
        );
        render(out, &name, &Latency(y), &mut written)?;
    }
    for (i, b) in results.breakdowns.iter().enumerate() {
        let name = numbered("breakdown", i, results.breakdowns.len());
        render(out, &name, &Stages(b), &mut written)?;
    }
    for (i, b) in results.bigtables.iter().enumerate() {
        let name = numbered("bigtable", i, results.bigtables.len());
        render(out, &name, &BigtableChart(b), &mut written)?;
    }
    Ok(written)
}

fn numbered(base: &str, i: usize, count: usize) -> String {
    if count == 1 {
        base.to_string()
    } else {
        format!("{base}-{}", i + 1)
    }
}

fn render(
    out: &Path,
    name: &str,
    chart: &impl Chart,
    written: &mut Vec<PathBuf>,
) -> Result<(), String> {
    let png = out.join(format!("{name}.png"));
    {
        let root = BitMapBackend::new(&png, SIZE).into_drawing_area();
        chart
            .draw(&root)
            .map_err(|e| format!("{}: {e}", png.display()))?;
        root.present()
            .map_err(|e| format!("{}: {}", png.display(), err(e)))?;
    }
    written.push(png);
    let svg = out.join(format!("{name}.svg"));
    {
        let root = SVGBackend::new(&svg, SIZE).into_drawing_area();
        chart
            .draw(&root)
            .map_err(|e| format!("{}: {e}", svg.display()))?;
        root.present()
            .map_err(|e| format!("{}: {}", svg.display(), err(e)))?;
    }
    written.push(svg);
    Ok(())
}

fn color(i: usize) -> RGBAColor {
    Palette99::pick(i).to_rgba()
}

/// The axis top for data whose largest value is `max`.
fn top(max: f64) -> f64 {
    if max > 0.0 && max.is_finite() {
        max * 1.15
    } else {
        1.0
    }
}

/// An axis label: whole numbers from 100 on, one decimal below.
fn short(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// YCSB throughput against client threads, one line per (workload, phase, db).
struct Throughput<'a>(&'a [Ycsb]);

impl Chart for Throughput<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        let mut series: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
        for y in self.0 {
            series
                .entry(format!("{} {} ({})", y.workload, y.phase, y.db))
                .or_default()
                .push((y.threads as f64, y.throughput));
        }
        for points in series.values_mut() {
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
        }
        let max_x = self.0.iter().map(|y| y.threads).max().unwrap_or(1) as f64;
        let max_y = self.0.iter().map(|y| y.throughput).fold(0.0, f64::max);
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(root)
            .caption("YCSB throughput vs client threads", (FONT, 22))
            .margin(14)
            .x_label_area_size(44)
            .y_label_area_size(80)
            .build_cartesian_2d(0f64..max_x + 1.0, 0f64..top(max_y))
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("client threads")
            // Thread counts are whole: label whole numbers only.
            .x_labels((max_x as usize + 2).min(17))
            .x_label_formatter(&|v: &f64| {
                if v.fract() == 0.0 {
                    format!("{v:.0}")
                } else {
                    String::new()
                }
            })
            .y_desc("ops/s")
            .y_label_formatter(&|v: &f64| short(*v))
            .label_style((FONT, LABEL_SIZE))
            .draw()
            .map_err(err)?;
        for (i, (name, points)) in series.iter().enumerate() {
            let c = color(i);
            chart
                .draw_series(LineSeries::new(points.iter().copied(), c.stroke_width(2)))
                .map_err(err)?
                .label(name.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2))
                });
            chart
                .draw_series(points.iter().map(|&p| Circle::new(p, 4, c.filled())))
                .map_err(err)?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .label_font((FONT, LABEL_SIZE))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(err)
    }
}

/// Bars in groups: `groups` along the x axis, one bar per `bars` name in each, `value(g, b)`
/// high; or, `stacked`, the bars of a group piled into one.
struct Bars<'a> {
    title: String,
    y_desc: &'a str,
    groups: Vec<String>,
    bars: Vec<String>,
    values: Vec<Vec<f64>>,
    stacked: bool,
}

impl Chart for Bars<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        let n = self.groups.len().max(1);
        let max_y = self
            .values
            .iter()
            .map(|g| {
                if self.stacked {
                    g.iter().sum()
                } else {
                    g.iter().copied().fold(0.0, f64::max)
                }
            })
            .fold(0.0, f64::max);
        // Room above the bars for the legend, one line per bar name.
        let headroom = 1.0 + 0.04 * self.bars.len() as f64;
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(root)
            .caption(&self.title, (FONT, 22))
            .margin(14)
            .x_label_area_size(44)
            .y_label_area_size(80)
            .build_cartesian_2d(-0.5f64..n as f64 - 0.5, 0f64..top(max_y) * headroom)
            .map_err(err)?;
        let groups = self.groups.clone();
        let label = move |x: &f64| {
            let i = x.round();
            if (x - i).abs() < 1e-6 && i >= 0.0 {
                groups.get(i as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        };
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(n + 1)
            .x_label_formatter(&label)
            .y_label_formatter(&|v: &f64| short(*v))
            .y_desc(self.y_desc)
            .label_style((FONT, LABEL_SIZE))
            .draw()
            .map_err(err)?;
        let width = 0.8
            / if self.stacked {
                1.0
            } else {
                self.bars.len().max(1) as f64
            };
        for (b, name) in self.bars.iter().enumerate() {
            let c = color(b);
            let rects = self.values.iter().enumerate().map(|(g, vals)| {
                let v = vals.get(b).copied().unwrap_or(0.0);
                let (x0, y0) = if self.stacked {
                    (g as f64 - 0.4, vals.iter().take(b).sum::<f64>())
                } else {
                    (g as f64 - 0.4 + b as f64 * width, 0.0)
                };
                Rectangle::new([(x0, y0), (x0 + width, y0 + v)], c.filled())
            });
            chart
                .draw_series(rects)
                .map_err(err)?
                .label(name.clone())
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], c.filled()));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .label_font((FONT, LABEL_SIZE))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(err)
    }
}

/// YCSB latency percentiles per operation.
struct Latency<'a>(&'a Ycsb);

impl Chart for Latency<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        let y = self.0;
        Bars {
            title: format!(
                "YCSB {} {} latency, {} threads ({})",
                y.workload, y.phase, y.threads, y.db
            ),
            y_desc: "latency (µs)",
            groups: y.latencies.iter().map(|(op, _)| op.clone()).collect(),
            bars: ["p50", "p95", "p99", "p99.9"].map(String::from).to_vec(),
            values: y.latencies.iter().map(|(_, p)| p.to_vec()).collect(),
            stacked: false,
        }
        .draw(root)
    }
}

/// Get and Put, each one bar stacked by stage.
struct Stages<'a>(&'a Breakdown);

impl Chart for Stages<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        let b = self.0;
        Bars {
            title: format!("Per-stage latency, {}-byte values", b.value_size),
            y_desc: "mean latency (µs)",
            groups: b.ops.iter().map(|(op, _)| op.to_uppercase()).collect(),
            bars: super::inputs::STAGES.map(String::from).to_vec(),
            values: b
                .ops
                .iter()
                .map(|(_, s)| s.iter().map(|(_, us)| *us).collect())
                .collect(),
            stacked: true,
        }
        .draw(root)
    }
}

/// Bigtable ops/s per test, one bar per value size.
struct BigtableChart<'a>(&'a Bigtable);

impl Chart for BigtableChart<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        let r = &self.0.results;
        let mut tests: Vec<String> = Vec::new();
        let mut sizes: Vec<u64> = Vec::new();
        for (t, s, _) in r {
            if !tests.contains(t) {
                tests.push(t.clone());
            }
            if !sizes.contains(s) {
                sizes.push(*s);
            }
        }
        sizes.sort_unstable();
        let values = tests
            .iter()
            .map(|t| {
                sizes
                    .iter()
                    .map(|s| {
                        r.iter()
                            .find(|(rt, rs, _)| rt == t && rs == s)
                            .map_or(0.0, |(_, _, v)| *v)
                    })
                    .collect()
            })
            .collect();
        Bars {
            title: format!("Bigtable §7 suite ({})", self.0.db),
            y_desc: "ops/s",
            groups: tests,
            bars: sizes.iter().map(|s| format!("{s}-byte values")).collect(),
            values,
            stacked: false,
        }
        .draw(root)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lowest inked row of each glyph of `text` drawn at `size` into a bitmap, glyphs
    /// told apart by the blank columns between them.
    fn glyph_bottoms(text: &str, size: u32) -> Vec<u32> {
        register_font().expect("font");
        let (w, h) = (160u32, 48u32);
        let mut buf = vec![255u8; (w * h * 3) as usize];
        {
            let root = BitMapBackend::with_buffer(&mut buf, (w, h)).into_drawing_area();
            root.draw_text(text, &(FONT, size).into_font().color(&BLACK), (4, 8))
                .expect("text drawn");
            root.present().expect("presented");
        }
        let inked = |x: u32, y: u32| buf[((y * w + x) * 3) as usize] < 160;
        let mut bottoms = Vec::new();
        let mut current: Option<u32> = None;
        for x in 0..w {
            let lowest = (0..h).rev().find(|&y| inked(x, y));
            match (lowest, current) {
                (Some(y), Some(b)) => current = Some(b.max(y)),
                (Some(y), None) => current = Some(y),
                (None, Some(b)) => {
                    bottoms.push(b);
                    current = None;
                }
                (None, None) => {}
            }
        }
        bottoms.extend(current);
        bottoms
    }

    #[test]
    fn dots_and_colons_sit_on_the_baseline_in_axis_and_legend_text() {
        let bottoms = glyph_bottoms("1.1:1", LABEL_SIZE);
        assert_eq!(bottoms.len(), 5, "glyphs found: {bottoms:?}");
        assert!(
            bottoms.iter().all(|&b| b == bottoms[0]),
            "every glyph ends on the same row: {bottoms:?}"
        );
    }
}
