//! A strict parser of the Prometheus/OpenMetrics text format, for the
//! metrics tests: every line must be a `# HELP`, `# TYPE`, `# UNIT` or
//! sample line of the family last declared, and the text must end with
//! `# EOF`. Hand-written because the parser crates on crates.io skip the
//! lines they do not understand, which is what a test must not do.

use std::collections::HashMap;

#[derive(Debug, Clone)]
pub struct Sample {
    pub name: String,
    pub labels: HashMap<String, String>,
    pub value: f64,
}

/// Every sample of `text`, and each family's declared type; panics with
/// the line at the first departure from the grammar.
pub fn parse(text: &str) -> (Vec<Sample>, HashMap<String, String>) {
    let (mut samples, mut types) = (Vec::new(), HashMap::new());
    let mut family: Option<String> = None;
    let mut lines = text.lines().peekable();
    let mut saw_eof = false;
    while let Some(line) = lines.next() {
        let bad = |why: &str| -> ! { panic!("line {line:?}: {why}\n---\n{text}") };
        if let Some(comment) = line.strip_prefix("# ") {
            let mut parts = comment.splitn(3, ' ');
            match (parts.next(), parts.next(), parts.next()) {
                (Some("EOF"), None, None) => {
                    saw_eof = true;
                    if lines.peek().is_some() {
                        bad("text after # EOF");
                    }
                }
                (Some("TYPE"), Some(name), Some(kind)) => {
                    if !is_name(name) {
                        bad("bad metric name");
                    }
                    let known = ["counter", "gauge", "histogram", "summary", "info", "stateset", "unknown"];
                    if !known.contains(&kind) {
                        bad("unknown type");
                    }
                    if types.insert(name.to_owned(), kind.to_owned()).is_some() {
                        bad("family declared twice");
                    }
                    family = Some(name.to_owned());
                }
                (Some("HELP" | "UNIT"), Some(name), _) if is_name(name) => {}
                _ => bad("not a HELP, TYPE, UNIT or EOF line"),
            }
            continue;
        }
        let sample = parse_sample(line).unwrap_or_else(|why| bad(why));
        let Some(fam) = &family else { bad("a sample before any # TYPE") };
        let suffix = sample.name.strip_prefix(fam.as_str()).unwrap_or_else(|| bad("a sample of another family"));
        if !["", "_total", "_bucket", "_count", "_sum", "_created", "_info"].contains(&suffix) {
            bad("a sample of another family");
        }
        samples.push(sample);
    }
    assert!(saw_eof, "the exposition must end with # EOF:\n{text}");
    (samples, types)
}

fn is_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

fn parse_sample(line: &str) -> Result<Sample, &'static str> {
    let end = line.find(['{', ' ']).ok_or("no value")?;
    let name = &line[..end];
    if !is_name(name) {
        return Err("bad metric name");
    }
    let mut rest = &line[end..];
    let mut labels = HashMap::new();
    if let Some(inner) = rest.strip_prefix('{') {
        rest = parse_labels(inner, &mut labels)?;
    }
    let mut fields = rest.strip_prefix(' ').ok_or("no space before the value")?.split(' ');
    let value = match fields.next().ok_or("no value")? {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        "NaN" => f64::NAN,
        v => v.parse::<f64>().map_err(|_| "the value is not a number")?,
    };
    if let Some(ts) = fields.next() {
        ts.parse::<f64>().map_err(|_| "the timestamp is not a number")?;
    }
    if fields.next().is_some() {
        return Err("text after the timestamp");
    }
    Ok(Sample { name: name.to_owned(), labels, value })
}

/// Reads `name="value",...}` and returns what follows the `}`.
fn parse_labels<'a>(mut s: &'a str, out: &mut HashMap<String, String>) -> Result<&'a str, &'static str> {
    loop {
        if let Some(rest) = s.strip_prefix('}') {
            return Ok(rest);
        }
        let eq = s.find('=').ok_or("a label without =")?;
        let name = &s[..eq];
        if !is_name(name) || name.contains(':') {
            return Err("bad label name");
        }
        let mut chars = s[eq + 1..].strip_prefix('"').ok_or("a label value without quotes")?.char_indices();
        let mut value = String::new();
        let close = loop {
            match chars.next().ok_or("an unterminated label value")? {
                (i, '"') => break i,
                (_, '\\') => match chars.next().ok_or("a dangling escape")?.1 {
                    'n' => value.push('\n'),
                    c @ ('\\' | '"') => value.push(c),
                    _ => return Err("a bad escape"),
                },
                (_, '\n') => return Err("a raw newline in a label value"),
                (_, c) => value.push(c),
            }
        };
        if out.insert(name.to_owned(), value).is_some() {
            return Err("a label given twice");
        }
        s = &s[eq + 1..][1 + close + 1..];
        s = s.strip_prefix(',').unwrap_or(s);
    }
}

/// The value of the one sample named `name` whose labels include `labels`
/// (0 when there is none yet; panics when several match).
pub fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> f64 {
    let found: Vec<&Sample> = samples
        .iter()
        .filter(|s| s.name == name && labels.iter().all(|(k, v)| s.labels.get(*k).is_some_and(|x| x == v)))
        .collect();
    assert!(found.len() <= 1, "several samples match {name} {labels:?}: {found:?}");
    found.first().map_or(0.0, |s| s.value)
}

#[test]
fn the_parser_rejects_what_the_grammar_does_not_allow() {
    let ok = "# TYPE a counter\n# HELP a An a.\na_total{x=\"1\\\"2\",y=\"\"} 3\n# EOF\n";
    let (samples, types) = parse(ok);
    assert_eq!(types["a"], "counter");
    assert_eq!(samples[0].labels["x"], "1\"2");
    assert_eq!(value(&samples, "a_total", &[("y", "")]), 3.0);
    for bad in [
        "a 1\n# EOF\n",
        "# TYPE a gauge\na{x=1} 1\n# EOF\n",
        "# TYPE a gauge\na 1 2 3\n# EOF\n",
        "# TYPE a gauge\nb 1\n# EOF\n",
        "# TYPE a gauge\na one\n# EOF\n",
        "# TYPE a gauge\na 1\n",
    ] {
        assert!(std::panic::catch_unwind(|| parse(bad)).is_err(), "accepted {bad:?}");
    }
}
