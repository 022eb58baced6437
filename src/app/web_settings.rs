//! What `pith serve` sets for the HTML forum once the state is built:
//! whether cookies are `Secure`, the site's public address, HSTS, and the
//! first run's one-time setup link; and the key that signs the signed-out
//! forms' CSRF tokens.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Mutex, RwLock};

use axum::http::{HeaderMap, HeaderValue, Uri};
use rand::RngCore;
use subtle::ConstantTimeEq;

use super::auth::{new_token, token_digest};

/// The pages' settings.
#[derive(Debug, Clone, clap::Args)]
pub struct WebConfig {
    /// Mark the web session cookies `Secure` (serve over HTTPS, e.g. behind a
    /// TLS proxy). They are also marked when a request carries
    /// `X-Forwarded-Proto: https`.
    #[arg(long, env = "PITH_SECURE_COOKIES", default_value_t = false, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub secure_cookies: bool,

    /// The site's address as readers reach it, `https://forum.example`
    /// (scheme, host, optional port; no path): the base of every absolute
    /// link (feeds, the setup link). Unset: the listen address, with
    /// https under --tls-cert. Never taken from a request's Host header.
    #[arg(long, env = "PITH_PUBLIC_URL", value_parser = parse_public_url)]
    pub public_url: Option<String>,

    /// Days browsers keep to HTTPS after a visit (the
    /// Strict-Transport-Security header), sent when the site is served over
    /// HTTPS (--tls-cert, or an https --public-url); 0 sends no header.
    #[arg(long, env = "PITH_HSTS_DAYS", default_value_t = 365, value_parser = clap::value_parser!(u32).range(0..=3650))]
    pub hsts_days: u32,
}

/// `--public-url`: `http(s)://host[:port]`, lower-cased, without a
/// trailing slash; anything more (a path, a query, credentials) is refused
/// rather than silently cut, since links would point at the wrong place.
pub fn parse_public_url(s: &str) -> Result<String, String> {
    let bad = |why: &str| format!("`{s}` is not a site address like https://forum.example: {why}");
    let uri: Uri = s.trim().parse().map_err(|_| bad("it does not parse as a URL"))?;
    let scheme = match uri.scheme_str() {
        Some("http") => "http",
        Some("https") => "https",
        _ => return Err(bad("the scheme must be http or https")),
    };
    let authority = uri.authority().ok_or_else(|| bad("it has no host"))?;
    if authority.as_str().contains('@') {
        return Err(bad("it carries credentials"));
    }
    if authority.host().is_empty() {
        return Err(bad("it has no host"));
    }
    if !matches!(uri.path(), "" | "/") || uri.query().is_some() {
        return Err(bad("serve the forum at the root of its host; a path or query is not supported"));
    }
    Ok(format!("{scheme}://{}", authority.as_str().to_ascii_lowercase()))
}

/// `SCHEME://HOST:PORT` of the listen address, the site's address when no
/// `--public-url` says otherwise; an unspecified address is shown as
/// `localhost` (another machine uses the server's name instead).
pub fn listen_url(scheme: &str, addr: std::net::SocketAddr) -> String {
    let host = match addr.ip() {
        ip if ip.is_unspecified() => "localhost".to_owned(),
        std::net::IpAddr::V6(ip) => format!("[{ip}]"),
        ip => ip.to_string(),
    };
    format!("{scheme}://{host}:{}", addr.port())
}

/// Web settings that `pith serve` sets after the state is built.
#[derive(Debug, Default)]
pub struct WebSettings {
    /// Mark cookies `Secure` even when no `X-Forwarded-Proto: https` says
    /// the request came over TLS (`--secure-cookies`).
    secure_cookies: AtomicBool,
    /// The first run's one-time setup link (`web::setup`).
    pub setup: SetupToken,
    /// Signs the CSRF token of a signed-out form (log in, register, setup)
    /// over its pre-session cookie (`web::session`).
    pub csrf_key: CsrfKey,
    /// `scheme://host[:port]`; empty until `pith serve` sets it.
    public_url: RwLock<String>,
    /// The Strict-Transport-Security max-age in days; 0 sends none.
    hsts_days: AtomicU32,
}

impl WebSettings {
    pub fn set_secure_cookies(&self, on: bool) {
        self.secure_cookies.store(on, Ordering::Relaxed);
    }

    /// Sets the site's address (an already parsed `--public-url`, or one
    /// made from the listen address) and how long HSTS lasts, which is
    /// sent only when that address is https.
    pub fn set_public_url(&self, url: &str, hsts_days: u32) {
        *self.public_url.write().unwrap_or_else(|e| e.into_inner()) = url.trim_end_matches('/').to_owned();
        self.hsts_days.store(hsts_days, Ordering::Relaxed);
    }

    /// The base of absolute links: the configured address, or
    /// `http://localhost` in a server built without `pith serve`.
    pub fn public_url(&self) -> String {
        let url = self.public_url.read().unwrap_or_else(|e| e.into_inner());
        if url.is_empty() { "http://localhost".to_owned() } else { url.clone() }
    }

    /// The Strict-Transport-Security value for an https site, else `None`.
    /// No `includeSubDomains`: a sibling host may not serve HTTPS.
    pub fn hsts(&self) -> Option<HeaderValue> {
        let days = self.hsts_days.load(Ordering::Relaxed);
        let https = self.public_url().starts_with("https://");
        (https && days > 0).then(|| {
            HeaderValue::from_str(&format!("max-age={}", u64::from(days) * 86_400)).expect("digits are a valid header")
        })
    }

    /// `Secure` when configured, or when a TLS-terminating proxy says the
    /// request was https. A forged header only makes the forger's own
    /// cookie stricter, so the header needs no trust.
    pub fn secure(&self, headers: &HeaderMap) -> bool {
        self.secure_cookies.load(Ordering::Relaxed)
            || headers
                .get("x-forwarded-proto")
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| v.trim().eq_ignore_ascii_case("https"))
    }
}

/// A server secret for the signed-out forms' CSRF tokens: 32 random bytes
/// made at start-up and held only in memory. A restart (or another node
/// of a cluster) makes signed-out forms already served fail their check
/// once: reloading the page gives a new token.
pub struct CsrfKey([u8; 32]);

impl Default for CsrfKey {
    fn default() -> Self {
        let mut key = [0u8; 32];
        rand::rng().fill_bytes(&mut key);
        CsrfKey(key)
    }
}

impl CsrfKey {
    pub fn bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

/// Never printed.
impl std::fmt::Debug for CsrfKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CsrfKey(..)")
    }
}

/// The digest of the setup token, while there is one.
#[derive(Debug, Default)]
pub struct SetupToken(Mutex<Option<[u8; 32]>>);

impl SetupToken {
    /// Makes a new token and returns it (the only time it is seen).
    pub fn issue(&self) -> String {
        let token = new_token();
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(token_digest(&token));
        token
    }

    pub fn matches(&self, token: &str) -> bool {
        let digest = token_digest(token);
        self.0.lock().unwrap_or_else(|e| e.into_inner()).is_some_and(|d| bool::from(d.ct_eq(&digest)))
    }

    pub fn revoke(&self) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_public_url_is_a_scheme_and_a_host_only() {
        assert_eq!(parse_public_url("https://Forum.Example/"), Ok("https://forum.example".into()));
        assert_eq!(parse_public_url("http://10.0.0.5:8080"), Ok("http://10.0.0.5:8080".into()));
        assert_eq!(parse_public_url("https://[::1]:8443"), Ok("https://[::1]:8443".into()));
        for bad in [
            "forum.example",
            "ftp://forum.example",
            "https://forum.example/pith",
            "https://u:p@forum.example",
            "https://forum.example/?a=1",
            "https://",
            "",
        ] {
            let err = parse_public_url(bad).expect_err(bad);
            assert!(err.contains("https://forum.example"), "{err}");
        }
    }

    #[test]
    fn hsts_is_sent_for_an_https_site_only() {
        let web = WebSettings::default();
        assert_eq!(web.public_url(), "http://localhost");
        web.set_public_url("http://forum.example", 365);
        assert_eq!(web.hsts(), None);
        web.set_public_url("https://forum.example", 365);
        assert_eq!(web.hsts().expect("hsts"), "max-age=31536000");
        web.set_public_url("https://forum.example", 0);
        assert_eq!(web.hsts(), None);
    }
}
