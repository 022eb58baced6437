//! `pith bench plot`: throughput and latency of each run, from the
//! `pith bench http --json` files of a session, as one SVG: a row per run,
//! a bar of req/s (linear) beside its read latency (p50 bar, p99 bar,
//! p99.9 tick, on a log scale since the servers differ by orders of
//! magnitude). Hand-written SVG rather than a plotting crate: it is a few
//! rectangles and labels, and keeps the dependency tree and build time
//! unchanged (plotters pulls in font rendering).

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;

use super::report::Summary;

#[derive(Debug, Clone, Args)]
pub struct PlotArgs {
    /// Files written by `pith bench http --json`, one row each, in this order.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,

    /// Write the SVG here instead of to standard output.
    #[arg(long, short = 'o')]
    pub out: Option<PathBuf>,

    /// Title at the top of the plot.
    #[arg(long, default_value = "pith bench http")]
    pub title: String,
}

pub fn main(args: PlotArgs) -> anyhow::Result<()> {
    let mut runs = Vec::new();
    for f in &args.files {
        let text = std::fs::read_to_string(f).with_context(|| format!("cannot read {}", f.display()))?;
        let run: Summary =
            serde_json::from_str(&text).with_context(|| format!("{} is not a bench summary", f.display()))?;
        runs.push(run);
    }
    let svg = svg(&runs, &args.title);
    match &args.out {
        Some(path) => std::fs::write(path, svg).with_context(|| format!("cannot write {}", path.display()))?,
        None => print!("{svg}"),
    }
    Ok(())
}

const LABEL_W: f64 = 250.0;
const BAR_W: f64 = 330.0;
/// The longest req/s bar: room for its number after it.
const RPS_W: f64 = BAR_W - 60.0;
const GAP: f64 = 40.0;
const ROW_H: f64 = 22.0;
const TOP: f64 = 64.0;
/// Latency axis: 0.1 ms to 100 s, log scale.
const LAT_MIN: f64 = 0.1;
const LAT_DECADES: f64 = 6.0;

/// The SVG document for `runs`.
pub fn svg(runs: &[Summary], title: &str) -> String {
    let width = LABEL_W + 2.0 * BAR_W + GAP + 80.0;
    let height = TOP + ROW_H * runs.len() as f64 + 50.0;
    let max_rps = runs.iter().map(|r| r.total.requests_per_s).fold(0.0, f64::max).max(1.0);
    let x_rps = LABEL_W;
    let x_lat = LABEL_W + BAR_W + GAP;
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width:.0}\" height=\"{height:.0}\" \
         viewBox=\"0 0 {width:.0} {height:.0}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"10\" y=\"22\" font-size=\"16\" font-weight=\"bold\">{}</text>\n\
         <text x=\"{x_rps}\" y=\"50\" font-weight=\"bold\">req/s (reads and posts)</text>\n\
         <text x=\"{x_lat}\" y=\"50\" font-weight=\"bold\">read latency, ms (log): p50 dark, p99 light, p99.9 tick</text>\n",
        escape(title)
    );
    let bottom = TOP + ROW_H * runs.len() as f64;
    // Latency grid: one line per decade.
    for d in 0..=LAT_DECADES as i32 {
        let x = x_lat + BAR_W * d as f64 / LAT_DECADES;
        let ms = LAT_MIN * 10f64.powi(d);
        let _ = writeln!(
            s,
            "<line x1=\"{x:.1}\" y1=\"{TOP}\" x2=\"{x:.1}\" y2=\"{bottom}\" stroke=\"#ddd\"/>\
             <text x=\"{x:.1}\" y=\"{:.0}\" text-anchor=\"middle\" fill=\"#555\">{}</text>",
            bottom + 16.0,
            trim_num(ms)
        );
    }
    let _ = writeln!(
        s,
        "<text x=\"{x_rps}\" y=\"{:.0}\" fill=\"#555\">0</text><text x=\"{:.1}\" y=\"{:.0}\" text-anchor=\"end\" \
         fill=\"#555\">{max_rps:.0}</text>",
        bottom + 16.0,
        x_rps + RPS_W,
        bottom + 16.0
    );
    for (i, r) in runs.iter().enumerate() {
        let y = TOP + ROW_H * i as f64;
        let h = ROW_H - 6.0;
        let colour = colour(r.label.as_deref().unwrap_or(""));
        let w = RPS_W * r.total.requests_per_s / max_rps;
        let l = &r.reads.latency_ms;
        let (p50, p99, p999) = (lat_x(l.p50), lat_x(l.p99), lat_x(l.p999));
        let _ = writeln!(
            s,
            "<text x=\"{:.0}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>\n\
             <rect x=\"{x_rps}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{h}\" fill=\"{colour}\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\">{:.0}</text>\n\
             <rect x=\"{x_lat}\" y=\"{y:.1}\" width=\"{p99:.1}\" height=\"{h}\" fill=\"{colour}\" fill-opacity=\"0.35\"/>\
             <rect x=\"{x_lat}\" y=\"{y:.1}\" width=\"{p50:.1}\" height=\"{h}\" fill=\"{colour}\"/>\
             <line x1=\"{:.1}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"black\" stroke-width=\"2\"/>",
            LABEL_W - 8.0,
            y + h - 3.0,
            escape(&row_label(r)),
            x_rps + w + 4.0,
            y + h - 3.0,
            r.total.requests_per_s,
            x_lat + p999,
            x_lat + p999,
            y + h,
        );
    }
    s.push_str("</svg>\n");
    s
}

/// "pith 400c gzip" and the load when it is not closed loop.
fn row_label(r: &Summary) -> String {
    let mut l = format!("{} · {} conns", r.label.as_deref().unwrap_or(&r.url), r.connections);
    if r.accept_gzip {
        l.push_str(" · gzip");
    }
    if let Some(rate) = r.rate {
        let _ = write!(l, " · {rate:.0}/s");
    }
    l
}

/// Position of a latency on the log axis, clamped to it.
fn lat_x(ms: f64) -> f64 {
    if ms <= LAT_MIN {
        return 0.0;
    }
    (BAR_W * (ms / LAT_MIN).log10() / LAT_DECADES).clamp(0.0, BAR_W)
}

/// One colour per kind of server, by the label's first word.
fn colour(label: &str) -> &'static str {
    let kind = label.split(['-', ' ', '_']).next().unwrap_or("");
    match kind {
        "hello" => "#7f7f7f",
        "c" => "#d62728",
        "pith" => "#1f77b4",
        _ => "#2ca02c",
    }
}

fn trim_num(x: f64) -> String {
    if x < 1.0 { format!("{x:.1}") } else { format!("{x:.0}") }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_is_placed_on_a_log_axis_and_clamped() {
        assert_eq!(lat_x(0.05), 0.0);
        assert!((lat_x(1.0) - BAR_W / LAT_DECADES).abs() < 1e-9);
        assert!((lat_x(100.0) - 3.0 * BAR_W / LAT_DECADES).abs() < 1e-9);
        assert_eq!(lat_x(1e9), BAR_W);
    }

    #[test]
    fn labels_are_escaped_for_xml() {
        assert_eq!(escape("a<b & \"c\">"), "a&lt;b &amp; &quot;c&quot;&gt;");
    }

    #[test]
    fn servers_get_their_own_colours() {
        assert_ne!(colour("pith"), colour("hello"));
        assert_eq!(colour("pith-perf"), colour("pith"));
        assert_eq!(colour("c"), "#d62728");
    }
}
