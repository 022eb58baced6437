//! `pith bench markdown`: what `markdown::render` costs for bodies of the
//! largest allowed size, ordinary and pathological (the nesting bombs of
//! docs/SECURITY.md), rendered N times each in-process. Prints the median
//! and the slowest render per body.

use std::time::{Duration, Instant};

use clap::Args;

use super::report::fmt_ms;
use crate::markdown;
use crate::model::MAX_BODY_CHARS;

#[derive(Debug, Clone, Args)]
pub struct MarkdownArgs {
    /// Renders per body.
    #[arg(long, short = 'n', default_value_t = 20)]
    pub renders: usize,

    /// Only the bodies whose name contains this.
    #[arg(long)]
    pub only: Option<String>,
}

/// `pattern` repeated to fill a body of the largest allowed size, then `tail`.
fn fill(pattern: &str, tail: &str) -> String {
    let times = (MAX_BODY_CHARS - tail.chars().count()) / pattern.chars().count();
    pattern.repeat(times) + tail
}

const TABLE_HEAD: &str = "|a|b|\n|-|-|\n";

/// The bodies measured: ordinary Markdown first, then the worst cases found.
pub fn bodies() -> Vec<(&'static str, String)> {
    let prose = "Some *text* with a [link](https://pith.example/x) and `code`, **bold** words.\n\n\
                 - one item\n- two items\n\n> a quote\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n";
    let nested_list: String = (0..400).map(|i| format!("{}- item\n", "  ".repeat(i % 8))).collect();
    vec![
        ("ordinary prose", fill(prose, "")),
        ("ordinary nested lists", fill(&nested_list, "")),
        ("quote-list bomb `> - `", fill("> - ", "x")),
        ("list bomb `- `", fill("- ", "x")),
        ("ordered list bomb `1. `", fill("1. ", "x")),
        ("quote bomb `> `", fill("> ", "x")),
        ("mixed bomb `* 1. `", fill("* 1. ", "x")),
        ("emphasis run `*a**a***`", fill("*a**a***", "")),
        ("nested emphasis `*...a...*`", "*".repeat(19_999) + "a" + &"*".repeat(19_999)),
        ("brackets `[[[`", "[".repeat(20_000) + &"](u)".repeat(5_000)),
        ("long table", format!("{TABLE_HEAD}{}", "|x|y|\n".repeat((MAX_BODY_CHARS - TABLE_HEAD.len()) / 6))),
        // The most HTML per byte under markdown::MAX_DEPTH: the worst that still renders as Markdown.
        ("deepest allowed `> - ` x10", fill(&format!("{}x\n\n", "> - ".repeat(10)), "")),
    ]
}

pub fn main(args: MarkdownArgs) -> anyhow::Result<()> {
    let renders = args.renders.max(1);
    println!("{:<30} {:>7} {:>9} {:>10} {:>10}", "body", "bytes", "html", "median", "max");
    for (name, body) in bodies() {
        if args.only.as_deref().is_some_and(|o| !name.contains(o)) {
            continue;
        }
        let mut times: Vec<Duration> = Vec::with_capacity(renders);
        let mut html_len = 0;
        for _ in 0..renders {
            let start = Instant::now();
            html_len = std::hint::black_box(markdown::render(&body)).len();
            times.push(start.elapsed());
        }
        times.sort();
        let median = times[times.len() / 2];
        let max = times[times.len() - 1];
        let ms = |d: Duration| fmt_ms(d.as_secs_f64() * 1000.0);
        println!("{name:<30} {:>7} {html_len:>9} {:>10} {:>10}", body.len(), ms(median), ms(max));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_body_is_of_an_allowed_size() {
        for (name, body) in bodies() {
            assert!(crate::model::Body::parse(&body).is_ok(), "{name} is not a valid body");
        }
    }
}
