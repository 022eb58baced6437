//! The administrators' rules for other servers (docs/FEDERATION.md,
//! "Instances"): a blocked host is refused everything, and once any host
//! is allowed, only allowed hosts federate (an allowlist, as Lemmy's
//! `allowed_instances`). A rule for a domain covers its subdomains, as
//! Mastodon's domain blocks do: a spammer's new subdomain costs nothing
//! to make. The most specific rule wins, so `good.example.net` can be
//! allowed inside a blocked `example.net`.

use std::collections::HashMap;

use serde::Serialize;

use super::Timestamp;

/// What a rule does to a host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum InstanceRule {
    Block,
    Allow,
}

impl InstanceRule {
    /// The number stored (`ap_instances.rule`).
    pub fn code(self) -> i64 {
        match self {
            InstanceRule::Block => 0,
            InstanceRule::Allow => 1,
        }
    }

    pub fn from_code(code: i64) -> Option<InstanceRule> {
        match code {
            0 => Some(InstanceRule::Block),
            1 => Some(InstanceRule::Allow),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            InstanceRule::Block => "block",
            InstanceRule::Allow => "allow",
        }
    }

    pub fn parse(s: &str) -> Result<InstanceRule, String> {
        match s.trim() {
            "block" => Ok(InstanceRule::Block),
            "allow" => Ok(InstanceRule::Allow),
            other => Err(format!("a rule is \"block\" or \"allow\", not {other:?}")),
        }
    }
}

/// A rule as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InstanceEntry {
    pub host: String,
    pub rule: InstanceRule,
    /// Why, for the other administrators; may be empty.
    pub reason: String,
    pub created_at: Timestamp,
}

/// The longest reason kept.
pub const MAX_REASON_CHARS: usize = 500;

/// A host as a rule names it: lowercase, without a port or a trailing
/// dot; a DNS name (labels of letters, digits and `-`) or an IP address.
/// A URL is refused rather than guessed at.
pub fn parse_host(s: &str) -> Result<String, String> {
    let s = s.trim();
    if s.contains("://") || s.contains('/') {
        return Err(format!("give the host alone (for example lemmy.example), not {s:?}"));
    }
    let host = s.trim_end_matches('.').to_ascii_lowercase();
    if host.is_empty() || host.len() > 253 {
        return Err("a host has 1 to 253 characters".into());
    }
    let unbracketed = host.trim_start_matches('[').trim_end_matches(']');
    if unbracketed.parse::<std::net::IpAddr>().is_ok() {
        return Ok(unbracketed.to_owned());
    }
    let label_ok = |l: &str| {
        (1..=63).contains(&l.len())
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    if host.split('.').all(label_ok) {
        Ok(host)
    } else {
        Err(format!("{s:?} is not a host name (letters, digits, '-' and '.') or an IP address"))
    }
}

/// The host of a URL's authority as rules name it: `host_of` gives
/// `name:port` or `[v6]:port`; the port is dropped (a rule covers every
/// port of a host).
pub fn rule_host(authority: &str) -> String {
    let a = authority.to_ascii_lowercase();
    let host = if let Some(rest) = a.strip_prefix('[') {
        rest.split(']').next().unwrap_or("").to_owned()
    } else {
        match a.rsplit_once(':') {
            Some((h, port)) if port.bytes().all(|b| b.is_ascii_digit()) => h.to_owned(),
            _ => a,
        }
    };
    host.trim_end_matches('.').to_owned()
}

/// Why a host may not federate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// A rule blocks it (the host the rule names).
    Blocked(String),
    /// Some hosts are allowed, and it is not one of them.
    NotAllowed,
}

/// Every rule, ready to judge a host.
#[derive(Debug, Clone, Default)]
pub struct InstancePolicy {
    rules: HashMap<String, InstanceRule>,
    any_allowed: bool,
}

impl InstancePolicy {
    pub fn new(entries: &[InstanceEntry]) -> InstancePolicy {
        let rules: HashMap<String, InstanceRule> = entries.iter().map(|e| (e.host.clone(), e.rule)).collect();
        let any_allowed = rules.values().any(|r| *r == InstanceRule::Allow);
        InstancePolicy { rules, any_allowed }
    }

    /// Whether `authority` (a host, with or without a port) may federate.
    pub fn judge(&self, authority: &str) -> Result<(), Refusal> {
        let host = rule_host(authority);
        // The host itself, then each parent domain (not for IP addresses).
        let mut candidates = vec![host.as_str()];
        if host.parse::<std::net::IpAddr>().is_err() {
            let mut rest = host.as_str();
            while let Some((_, parent)) = rest.split_once('.') {
                candidates.push(parent);
                rest = parent;
            }
        }
        match candidates.iter().find_map(|h| self.rules.get(*h).map(|r| (*h, *r))) {
            Some((h, InstanceRule::Block)) => Err(Refusal::Blocked(h.to_owned())),
            Some((_, InstanceRule::Allow)) => Ok(()),
            None if self.any_allowed => Err(Refusal::NotAllowed),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(host: &str, rule: InstanceRule) -> InstanceEntry {
        InstanceEntry { host: host.into(), rule, reason: String::new(), created_at: Timestamp(0) }
    }

    #[test]
    fn hosts_are_named_in_lowercase_without_port_or_scheme() {
        assert_eq!(parse_host(" Lemmy.Example. ").as_deref(), Ok("lemmy.example"));
        assert_eq!(parse_host("127.0.0.1").as_deref(), Ok("127.0.0.1"));
        assert_eq!(parse_host("[::1]").as_deref(), Ok("::1"));
        assert!(parse_host("https://lemmy.example/").is_err());
        assert!(parse_host("lemmy.example/c/x").is_err());
        assert!(parse_host("").is_err());
        assert!(parse_host("-bad.example").is_err());
        assert!(parse_host("a b.example").is_err());
        assert!(parse_host(&"a".repeat(254)).is_err());
        assert_eq!(rule_host("Lemmy.Example:8443"), "lemmy.example");
        assert_eq!(rule_host("[::1]:80"), "::1");
        assert_eq!(rule_host("127.0.0.1:9"), "127.0.0.1");
    }

    #[test]
    fn a_block_covers_subdomains_and_the_most_specific_rule_wins() {
        let p = InstancePolicy::new(&[
            entry("spam.example", InstanceRule::Block),
            entry("ok.spam.example", InstanceRule::Allow),
        ]);
        assert_eq!(p.judge("spam.example"), Err(Refusal::Blocked("spam.example".into())));
        assert_eq!(p.judge("x.y.spam.example:443"), Err(Refusal::Blocked("spam.example".into())));
        assert_eq!(p.judge("ok.spam.example"), Ok(()));
        // An allow rule makes the list an allowlist: others are refused.
        assert_eq!(p.judge("elsewhere.example"), Err(Refusal::NotAllowed));
        assert_eq!(p.judge("notspam.example"), Err(Refusal::NotAllowed));
    }

    #[test]
    fn with_blocks_only_every_other_host_federates() {
        let p = InstancePolicy::new(&[entry("127.0.0.1", InstanceRule::Block)]);
        assert!(p.judge("127.0.0.1:8080").is_err());
        assert_eq!(p.judge("127.0.0.2:8080"), Ok(()));
        assert_eq!(InstancePolicy::default().judge("any.example"), Ok(()));
    }
}
