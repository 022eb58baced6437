//! Cookie sessions and CSRF tokens for the HTML forms.
//!
//! A session cookie carries a bearer token like the API's: 32 random bytes,
//! stored only as a SHA-256 digest in the same token table, looked up
//! through the same token cache, revoked the same way at logout.
//!
//! CSRF: a signed-in form carries HMAC-SHA256(session token, "pith-csrf");
//! only a page served to that session can know it, and a signed-in post
//! is checked against nothing else. An anonymous form (login, register,
//! setup) carries HMAC-SHA256(server key, "pith-anon-csrf" + the random
//! value of its `pith_csrf` pre-session cookie): a value a same-site page
//! tosses into the cookie jar comes with no token the server signed. Both
//! are compared in constant time.
//!
//! Each page masks its token afresh (a random pad, then the token XOR the
//! pad, as Rails and Django do), so no two responses carry the same bytes:
//! BREACH guesses a secret byte by byte from how well a compressed
//! response shrinks when the page also reflects the guess (the search
//! box's `q`), which needs the secret to be the same in every response.
//!
//! Over TLS every cookie here is named with the `__Host-` prefix (so
//! `__Host-pith_session`): a browser takes such a cookie only from a
//! secure origin, with `Path=/` and no `Domain`, so neither a sibling
//! subdomain nor a plain-HTTP page on the host can set it; the plain names
//! are then not read at all.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, header};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::app::AppState;
use crate::app::auth::{new_token, token_digest};
use crate::model::User;
use crate::store::Store;

pub const SESSION_COOKIE: &str = "pith_session";
pub const CSRF_COOKIE: &str = "pith_csrf";
/// Over TLS, the session and CSRF cookies' names start with this.
const HOST_PREFIX: &str = "__Host-";
/// A new invite code, from the form that made it to the page that shows
/// it once (`/admin`).
pub const INVITE_COOKIE: &str = "pith_invite";
/// How long a value handed to the next page lives.
const FLASH_MAX_AGE: u64 = 300;
/// How long a browser keeps the session cookie: 400 days, the most
/// browsers allow. The server ends a session left unused for
/// `--session-idle-days`, and logging out revokes it at once.
const SESSION_MAX_AGE: u64 = 400 * 24 * 3600;

/// Who is asking, and the CSRF token their forms carry.
pub struct Session {
    pub user: Option<User>,
    /// The user's unread notifications, for the header of a page: read
    /// only for a signed-in page view (a GET that is not the script's
    /// fetch), never for a signed-out visitor.
    pub unread: Option<i64>,
    /// The session token from the cookie, when it is valid.
    token: Option<String>,
    /// The pre-session cookie's random value, from the cookie or new.
    anon: String,
    /// The anonymous forms' token: `anon` signed with the server's key.
    anon_signed: [u8; 32],
    /// The anonymous cookie must be set on the response (it was missing).
    anon_is_new: bool,
    secure: bool,
}

impl<S: Store> FromRequestParts<AppState<S>> for Session {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, state: &AppState<S>) -> Result<Self, Self::Rejection> {
        let secure = state.web.secure(&parts.headers);
        let token =
            cookie(&parts.headers, &cookie_name(SESSION_COOKIE, secure)).filter(|t| !t.is_empty() && t.len() <= 128);
        let mut user = None;
        let mut valid_token = None;
        if let Some(token) = token {
            // Through the token cache and the idle limits; a failed lookup
            // leaves the request anonymous (fails closed).
            user = crate::app::sessions::token_user(&state.0, token_digest(token)).await.ok().flatten();
            if user.is_some() {
                valid_token = Some(token.to_owned());
            }
        }
        let page_view = parts.method == axum::http::Method::GET && !super::forms::is_fetch(&parts.headers);
        let unread = match &user {
            Some(user) if page_view => crate::app::inbox::unread(state, user).await.ok(),
            _ => None,
        };
        let existing = cookie(&parts.headers, &cookie_name(CSRF_COOKIE, secure)).filter(|v| v.len() == 43);
        let (anon, anon_is_new) = match existing {
            Some(v) => (v.to_owned(), false),
            None => (new_token(), true),
        };
        let anon_signed = anon_csrf(state.web.csrf_key.bytes(), &anon);
        Ok(Session { user, unread, token: valid_token, anon, anon_signed, anon_is_new, secure })
    }
}

impl Session {
    /// The token to put in this page's forms, masked afresh (`mask`).
    pub fn csrf(&self) -> String {
        mask(&self.expected_csrf())
    }

    /// The unmasked token this session's forms must carry.
    fn expected_csrf(&self) -> [u8; 32] {
        match &self.token {
            Some(t) => signed_csrf(t),
            None => self.anon_signed,
        }
    }

    /// True when `sent` is this session's token; without a session, the
    /// server's signature of the pre-session cookie. With a session nothing
    /// else counts: whatever the cookie jar holds, a page that does not
    /// know the session token cannot post as it.
    pub fn csrf_ok(&self, sent: &str) -> bool {
        // Only a pre-session cookie that came with the request: a new one
        // was never sent to a form.
        if self.token.is_none() && self.anon_is_new {
            return false;
        }
        unmask(sent).is_some_and(|sent| bool::from(sent.ct_eq(&self.expected_csrf())))
    }

    /// The digest of the session token, for logout.
    pub fn token_digest(&self) -> Option<[u8; 32]> {
        self.token.as_deref().map(token_digest)
    }

    /// `Set-Cookie` for the anonymous CSRF cookie when it is new.
    pub fn anon_cookie(&self) -> Option<HeaderValue> {
        self.anon_is_new.then(|| cookie_header(CSRF_COOKIE, &self.anon, None, self.secure))
    }

    /// `Set-Cookie` that starts a session with `token`.
    pub fn login_cookie(&self, token: &str) -> HeaderValue {
        cookie_header(SESSION_COOKIE, token, Some(SESSION_MAX_AGE), self.secure)
    }

    /// `Set-Cookie` that ends the session in the browser.
    pub fn logout_cookie(&self) -> HeaderValue {
        cookie_header(SESSION_COOKIE, "", Some(0), self.secure)
    }

    /// `Set-Cookie` for a value the next page under `path` shows once;
    /// an empty `value` clears it.
    pub fn flash_cookie(&self, name: &str, value: &str, path: &str) -> HeaderValue {
        let age = if value.is_empty() { 0 } else { FLASH_MAX_AGE };
        cookie_at(name, value, path, Some(age), self.secure)
    }
}

/// HMAC-SHA256(key = session token, "pith-csrf").
fn signed_csrf(token: &str) -> [u8; 32] {
    hmac_sha256(token.as_bytes(), b"pith-csrf")
}

/// base64url(pad || token XOR pad) with a new random pad.
fn mask(token: &[u8; 32]) -> String {
    let mut out = [0u8; 64];
    let (pad, masked) = out.split_at_mut(32);
    rand::RngCore::fill_bytes(&mut rand::rng(), pad);
    for ((m, t), p) in masked.iter_mut().zip(token).zip(pad.iter()) {
        *m = t ^ p;
    }
    URL_SAFE_NO_PAD.encode(out)
}

/// The token inside a masked one; `None` for anything not 64 bytes of
/// base64url.
fn unmask(sent: &str) -> Option<[u8; 32]> {
    if sent.len() != 86 {
        return None;
    }
    let bytes = URL_SAFE_NO_PAD.decode(sent).ok()?;
    let (pad, masked) = bytes.split_at(32);
    let mut token = [0u8; 32];
    for ((t, m), p) in token.iter_mut().zip(masked).zip(pad) {
        *t = m ^ p;
    }
    Some(token)
}

/// HMAC-SHA256(key = the server's key, "pith-anon-csrf" + the pre-session
/// cookie's value), base64url: a different message from `signed_csrf`'s,
/// so neither token stands for the other.
fn anon_csrf(key: &[u8], cookie: &str) -> [u8; 32] {
    let msg = [b"pith-anon-csrf".as_slice(), cookie.as_bytes()].concat();
    hmac_sha256(key, &msg)
}

/// The session and CSRF cookies' name: `__Host-` prefixed over TLS.
fn cookie_name(base: &str, secure: bool) -> String {
    if secure { format!("{HOST_PREFIX}{base}") } else { base.to_owned() }
}

/// RFC 2104, written out: it is the only HMAC the server needs.
fn hmac_sha256(key: &[u8], msg: &[u8]) -> [u8; 32] {
    const BLOCK: usize = 64;
    let mut k = [0u8; BLOCK];
    if key.len() > BLOCK {
        k[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        k[..key.len()].copy_from_slice(key);
    }
    let pad = |byte: u8| k.map(|b| b ^ byte);
    let inner = Sha256::new().chain_update(pad(0x36)).chain_update(msg).finalize();
    Sha256::new().chain_update(pad(0x5c)).chain_update(inner).finalize().into()
}

/// A session or CSRF cookie: at `/`, named for `secure` (`cookie_name`).
fn cookie_header(base: &str, value: &str, max_age: Option<u64>, secure: bool) -> HeaderValue {
    cookie_at(&cookie_name(base, secure), value, "/", max_age, secure)
}

fn cookie_at(name: &str, value: &str, path: &str, max_age: Option<u64>, secure: bool) -> HeaderValue {
    let mut s = format!("{name}={value}; Path={path}; HttpOnly; SameSite=Lax");
    if let Some(age) = max_age {
        s.push_str(&format!("; Max-Age={age}"));
    }
    if secure {
        s.push_str("; Secure");
    }
    // Names, paths and values are ours, base64url or empty: always valid.
    HeaderValue::from_str(&s).unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// The value of cookie `name`, from any `Cookie` header.
pub fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_matches_rfc_4231_test_case_2() {
        let mac = hmac_sha256(b"Jefe", b"what do ya want for nothing?");
        let hex: String = mac.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    }

    #[test]
    fn each_session_token_signs_its_own_csrf_token() {
        assert_eq!(signed_csrf("token-a"), signed_csrf("token-a"));
        assert_ne!(signed_csrf("token-a"), signed_csrf("token-b"));
    }

    /// BREACH (docs/SECURITY.md): no two pages carry the same bytes, and
    /// every masking of the token is accepted while nothing else is.
    #[test]
    fn each_masking_of_a_token_differs_and_unmasks_to_it() {
        let token = signed_csrf("token-a");
        let (one, two) = (mask(&token), mask(&token));
        assert_ne!(one, two);
        assert_eq!(one.len(), 86);
        assert_eq!(unmask(&one), Some(token));
        assert_eq!(unmask(&two), Some(token));
        assert_ne!(unmask(&mask(&signed_csrf("token-b"))), Some(token));
        let unmasked = URL_SAFE_NO_PAD.encode(token);
        for bad in [unmasked.as_str(), "", "forged", &one[..85], &format!("{one}A"), &format!("*{}", &one[1..])] {
            assert!(unmask(bad).is_none_or(|t| t != token), "{bad:?}");
        }
    }

    #[test]
    fn cookies_are_found_among_others() {
        let mut h = HeaderMap::new();
        h.insert(header::COOKIE, HeaderValue::from_static("a=1; pith_session=abc ; b=2"));
        assert_eq!(cookie(&h, SESSION_COOKIE), Some("abc"));
        assert_eq!(cookie(&h, CSRF_COOKIE), None);
    }

    #[test]
    fn session_cookies_are_http_only_lax_and_secure_when_asked() {
        let c = cookie_header(SESSION_COOKIE, "t", Some(60), true);
        assert_eq!(c, "__Host-pith_session=t; Path=/; HttpOnly; SameSite=Lax; Max-Age=60; Secure");
        let plain = cookie_header(SESSION_COOKIE, "t", None, false);
        assert_eq!(plain, "pith_session=t; Path=/; HttpOnly; SameSite=Lax");
    }

    #[test]
    fn an_anonymous_token_is_the_servers_signature_of_its_cookie() {
        let (a, b) = ([1u8; 32], [2u8; 32]);
        assert_eq!(anon_csrf(&a, "cookie"), anon_csrf(&a, "cookie"));
        assert_ne!(anon_csrf(&a, "cookie"), anon_csrf(&b, "cookie"), "another key, another token");
        assert_ne!(anon_csrf(&a, "cookie"), anon_csrf(&a, "cookie2"));
    }
}
