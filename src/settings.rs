//! Value parsers every module's settings share: durations, and database
//! URLs (which one is PostgreSQL, and how to show one without its
//! password). Each module owns its own settings struct; these are the
//! pieces they have in common, written once.

use std::time::Duration;

/// Parses `15s`, `500ms`, `2m`, `1h` or a bare number of seconds (`1.5`),
/// from zero up to a day.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let value: f64 = num.parse().map_err(|_| format!("`{s}` is not a duration like 15s, 500ms or 2m"))?;
    let secs = match unit.trim() {
        "" | "s" => value,
        "ms" => value / 1000.0,
        "m" | "min" => value * 60.0,
        "h" => value * 3600.0,
        other => return Err(format!("unknown duration unit `{other}` (use ms, s, m or h)")),
    };
    if !(0.0..=86_400.0).contains(&secs) {
        return Err(format!("`{s}` is out of range (0 to 24 h)"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// `parse_duration` for an interval, which must be at least a millisecond.
pub fn parse_interval(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d < Duration::from_millis(1) {
        return Err(format!("`{}` is out of range (1 ms to 24 h)", s.trim()));
    }
    Ok(d)
}

/// Reader connections by default: about one per core.
pub fn default_readers() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2).clamp(1, 16)
}

pub fn is_postgres_url(s: &str) -> bool {
    s.starts_with("postgres://") || s.starts_with("postgresql://")
}

/// `url` with its password masked, for logs and messages.
pub fn redact_url(url: &str) -> String {
    mask_password(url, "***")
}

/// `url` with its password, if it has one, replaced by `with`.
pub fn mask_password(url: &str, with: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_owned() };
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let Some(at) = rest[..authority_end].rfind('@') else { return url.to_owned() };
    match rest[..at].split_once(':') {
        Some((user, _password)) => format!("{scheme}://{user}:{with}{}", &rest[at..]),
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_or_without_a_unit() {
        assert_eq!(parse_duration("15s"), Ok(Duration::from_secs(15)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1.5"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("0s"), Ok(Duration::ZERO));
    }

    #[test]
    fn a_duration_with_an_unknown_unit_or_no_number_is_rejected() {
        assert!(parse_duration("15 parsecs").is_err());
        assert!(parse_duration("s").is_err());
        assert!(parse_duration("").is_err());
        assert!(parse_duration("999999h").is_err());
    }

    #[test]
    fn an_interval_of_zero_is_rejected() {
        assert!(parse_interval("0s").is_err());
        assert_eq!(parse_interval("16s"), Ok(Duration::from_secs(16)));
    }

    #[test]
    fn a_password_never_shows_in_a_redacted_url() {
        assert_eq!(redact_url("postgres://pith:s3cr:et@h:5432/db"), "postgres://pith:***@h:5432/db");
        assert_eq!(redact_url("postgres://pith@h/db"), "postgres://pith@h/db");
        assert_eq!(redact_url("postgres://h/db?user=a"), "postgres://h/db?user=a");
        assert_eq!(redact_url("nats://u:p@h:4222"), "nats://u:***@h:4222");
    }
}
