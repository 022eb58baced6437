//! What `pith serve` sets for the HTML forum once the state is built:
//! whether cookies are `Secure`, and the first run's one-time setup link;
//! and the key that signs the signed-out forms' CSRF tokens.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::http::HeaderMap;
use rand::RngCore;
use subtle::ConstantTimeEq;

use super::auth::{new_token, token_digest};

/// The pages' setting (`--secure-cookies`).
#[derive(Debug, Clone, clap::Args)]
pub struct WebConfig {
    /// Mark the web session cookies `Secure` (serve over HTTPS, e.g. behind a
    /// TLS proxy). They are also marked when a request carries
    /// `X-Forwarded-Proto: https`.
    #[arg(long, env = "PITH_SECURE_COOKIES", default_value_t = false, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub secure_cookies: bool,
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
}

impl WebSettings {
    pub fn set_secure_cookies(&self, on: bool) {
        self.secure_cookies.store(on, Ordering::Relaxed);
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
