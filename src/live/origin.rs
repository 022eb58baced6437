//! Whose pages may open a user's inbox: a browser sends `Origin` with
//! every WebSocket handshake (and cross-origin `EventSource`), and a page
//! may open a socket to any site, so an inbox opened from a foreign page
//! would be cross-site WebSocket hijacking. Public topics need no check.

/// The origins besides the site's own that may open an inbox, parsed once
/// from `--live-allowed-origins`.
#[derive(Debug, Clone, Default)]
pub struct Origins(Vec<Box<str>>);

impl Origins {
    /// `https://a.example, http://b.example:8080`: compared without case
    /// and without a trailing `/`; empty entries are skipped.
    pub fn parse(list: &str) -> Origins {
        let norm = |o: &str| o.trim().trim_end_matches('/').to_ascii_lowercase().into_boxed_str();
        Origins(list.split(',').map(norm).filter(|o| !o.is_empty()).collect())
    }

    /// Whether a request with this `Origin` and `Host` may open an inbox:
    /// no `Origin` (not a browser), an allow-listed one, or one whose
    /// host and port are the request's `Host`.
    pub fn allow(&self, origin: Option<&[u8]>, host: Option<&[u8]>) -> bool {
        let Some(origin) = origin else { return true };
        let Ok(origin) = std::str::from_utf8(origin) else { return false };
        let origin = origin.to_ascii_lowercase();
        if self.0.iter().any(|o| **o == origin) {
            return true;
        }
        let Some(host) = host.and_then(|h| std::str::from_utf8(h).ok()) else { return false };
        same_site(&origin, &host.to_ascii_lowercase())
    }
}

/// `--live-allowed-origins` checked as clap parses it: each entry must be
/// an origin, `scheme://host[:port]` of http(s) or ws(s) with nothing
/// after it, or it could never match and would fail silently.
pub fn check_list(list: &str) -> Result<String, String> {
    for entry in list.split(',').map(|o| o.trim().trim_end_matches('/')).filter(|o| !o.is_empty()) {
        let valid = entry.split_once("://").is_some_and(|(scheme, authority)| {
            let scheme = scheme.to_ascii_lowercase();
            matches!(scheme.as_str(), "http" | "https" | "ws" | "wss") && host_port(authority, 0).is_some()
        });
        if !valid {
            return Err(format!("{entry:?} is not an origin like https://forum.example or http://host:8080"));
        }
    }
    Ok(list.to_owned())
}

/// `origin` (lower case, `scheme://host[:port]`) names the same host and
/// port as `host` (lower case, `host[:port]`); a missing port is the
/// scheme's default.
fn same_site(origin: &str, host: &str) -> bool {
    let Some((scheme, authority)) = origin.split_once("://") else { return false };
    let default = match scheme {
        "http" | "ws" => 80,
        "https" | "wss" => 443,
        _ => return false,
    };
    match (host_port(authority, default), host_port(host, default)) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    }
}

/// `host[:port]` (`[v6]:port` too) as host and port.
fn host_port(s: &str, default: u16) -> Option<(&str, u16)> {
    let (host, port) = match s.rfind(':') {
        Some(i) if !s[i..].contains(']') => (&s[..i], Some(&s[i + 1..])),
        _ => (s, None),
    };
    let port = match port {
        Some(p) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => p.parse().ok()?,
        Some(_) => return None,
        None => default,
    };
    let ok = |c: u8| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'-' | b'_' | b'[' | b']' | b':');
    (!host.is_empty() && host.bytes().all(ok)).then_some((host, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allow(list: &str, origin: Option<&str>, host: &str) -> bool {
        Origins::parse(list).allow(origin.map(str::as_bytes), Some(host.as_bytes()))
    }

    #[test]
    fn an_allow_list_entry_that_is_not_an_origin_is_refused() {
        assert!(check_list("").is_ok());
        assert!(check_list("https://a.example, http://b.example:8080/").is_ok());
        for bad in ["a.example", "ftp://a.example", "https://a.example/path", "https://", "https://a.example:x"] {
            let err = check_list(bad).expect_err(bad);
            assert!(err.contains("is not an origin"), "{bad}: {err}");
        }
    }

    #[test]
    fn the_sites_own_origin_and_no_origin_are_allowed() {
        assert!(allow("", None, "forum.example"));
        assert!(allow("", Some("https://forum.example"), "forum.example"));
        assert!(allow("", Some("https://Forum.example"), "forum.example:443"));
        assert!(allow("", Some("http://127.0.0.1:8080"), "127.0.0.1:8080"));
        assert!(allow("", Some("http://[::1]:8080"), "[::1]:8080"));
    }

    #[test]
    fn other_hosts_ports_and_look_alikes_are_foreign() {
        for origin in [
            "https://evil.example",
            "null",
            "http://127.0.0.1:8081",
            "http://127.0.0.1:8080.evil.example",
            "http://127.0.0.1:8080@evil.example",
            "https://127.0.0.1",
            "file://",
            "http://[::1]",
        ] {
            assert!(!allow("", Some(origin), "127.0.0.1:8080"), "{origin}");
        }
        assert!(!Origins::default().allow(Some(b"https://forum.example"), None), "no Host");
    }

    #[test]
    fn allow_listed_origins_match_exactly_but_for_case_and_a_trailing_slash() {
        let list = " https://app.example/ ,, http://b.example:8080";
        assert!(allow(list, Some("https://APP.example"), "forum.example"));
        assert!(allow(list, Some("http://b.example:8080"), "forum.example"));
        assert!(!allow(list, Some("http://app.example"), "forum.example"));
        assert!(!allow(list, Some("http://b.example"), "forum.example"));
        assert!(!allow(list, Some("https://app.example.evil"), "forum.example"));
    }
}
