//! Accounts' secrets: argon2id password hashes, random bearer tokens stored
//! only as SHA-256 digests, and a small in-memory map from token digest to
//! user so an authenticated write does not cost a database read; and
//! `AuthUser`, who acts, from a request's bearer token.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use argon2::Argon2;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString, rand_core::OsRng};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rand::RngCore;
use sha2::{Digest, Sha256};

use axum::extract::FromRequestParts;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;

use super::{AppError, AppState};
use crate::model::User;
use crate::store::Store;

/// Hashes with argon2id and the crate's defaults (19 MiB, 2 passes), the
/// OWASP minimum; about 30 ms on this machine, a few times that on a Pi.
pub fn hash_password(password: &str) -> Result<String, String> {
    let salt = SaltString::generate(&mut OsRng);
    Argon2::default().hash_password(password.as_bytes(), &salt).map(|h| h.to_string()).map_err(|e| e.to_string())
}

/// Constant-time verification (the argon2 crate compares digests with `subtle`).
pub fn verify_password(password: &str, hash: &str) -> bool {
    PasswordHash::new(hash)
        .map(|parsed| Argon2::default().verify_password(password.as_bytes(), &parsed).is_ok())
        .unwrap_or(false)
}

/// A hash to verify against when the user does not exist, so that a login
/// for an unknown name costs as long as one with a wrong password.
pub fn dummy_hash() -> &'static str {
    static DUMMY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    DUMMY.get_or_init(|| hash_password("not-a-real-password").unwrap_or_default())
}

/// A new bearer token: 32 random bytes, base64url.
pub fn new_token() -> String {
    let mut raw = [0u8; 32];
    rand::rng().fill_bytes(&mut raw);
    URL_SAFE_NO_PAD.encode(raw)
}

/// What the database stores for a token.
pub fn token_digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// The name a session or token goes by in its owner's list and URLs: a
/// hash of its digest, so neither the token nor the key it is stored
/// under is ever shown. 72 bits: unique among one user's tokens.
pub fn token_id(digest: &[u8; 32]) -> String {
    let id = Sha256::new().chain_update(b"pith-token-id").chain_update(digest).finalize();
    URL_SAFE_NO_PAD.encode(&id[..9])
}

/// Token digest -> user, for a minute at most. Revocation removes the entry
/// at once, so a logged-out token stops working immediately.
pub struct TokenCache {
    map: Mutex<HashMap<[u8; 32], (User, Instant)>>,
}

const TOKEN_TTL: Duration = Duration::from_secs(60);
const TOKEN_CACHE_MAX: usize = 100_000;

impl TokenCache {
    pub fn new() -> TokenCache {
        TokenCache { map: Mutex::new(HashMap::new()) }
    }

    pub fn get(&self, digest: &[u8; 32]) -> Option<User> {
        let map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        map.get(digest).filter(|(_, at)| at.elapsed() < TOKEN_TTL).map(|(u, _)| u.clone())
    }

    pub fn put(&self, digest: [u8; 32], user: User) {
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() >= TOKEN_CACHE_MAX {
            map.retain(|_, (_, at)| at.elapsed() < TOKEN_TTL);
            if map.len() >= TOKEN_CACHE_MAX {
                map.clear();
            }
        }
        map.insert(digest, (user, Instant::now()));
    }

    pub fn remove(&self, digest: &[u8; 32]) {
        self.map.lock().unwrap_or_else(|p| p.into_inner()).remove(digest);
    }

    /// Forgets every cached token of `user_id`: another node revoked some
    /// of them, and this one cannot tell which (`Change::TokensRevoked`).
    pub fn forget_user(&self, user_id: i64) {
        self.map.lock().unwrap_or_else(|p| p.into_inner()).retain(|_, (user, _)| user.id != user_id);
    }

    /// Forgets every cached token (the cluster bus may have lost a
    /// revocation).
    pub fn clear(&self) {
        self.map.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }
}

impl Default for TokenCache {
    fn default() -> Self {
        Self::new()
    }
}

/// The user behind a valid `Authorization: Bearer TOKEN`; 401 otherwise.
pub struct AuthUser {
    pub user: User,
    pub digest: [u8; 32],
}

impl<S: Store> FromRequestParts<AppState<S>> for AuthUser {
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState<S>) -> Result<Self, AppError> {
        let header = parts.headers.get(AUTHORIZATION).ok_or(AppError::Unauthorized)?;
        let value = header.to_str().map_err(|_| AppError::Unauthorized)?;
        // The scheme name is case-insensitive (RFC 9110 11.1).
        let token = value
            .split_once(' ')
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, t)| t.trim())
            .filter(|t| !t.is_empty() && t.len() <= 128)
            .ok_or(AppError::Unauthorized)?;
        let digest = token_digest(token);
        let user = super::sessions::token_user(&state.0, digest).await?.ok_or(AppError::Unauthorized)?;
        Ok(AuthUser { user, digest })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_verifies_against_its_own_hash_only() {
        let h = hash_password("correct horse").expect("hash");
        assert!(h.starts_with("$argon2id$"));
        assert!(verify_password("correct horse", &h));
        assert!(!verify_password("wrong horse", &h));
        assert!(!verify_password("x", "not a hash"));
    }

    #[test]
    fn a_token_id_names_a_token_without_showing_it_or_its_digest() {
        let digest = token_digest("secret");
        let id = token_id(&digest);
        assert_eq!(id.len(), 12);
        assert_eq!(id, token_id(&digest));
        assert_ne!(id, token_id(&token_digest("other")));
        assert!(!URL_SAFE_NO_PAD.encode(digest).contains(&id));
    }

    #[test]
    fn tokens_are_unique_and_stored_only_as_digests() {
        let (a, b) = (new_token(), new_token());
        assert_ne!(a, b);
        assert_eq!(token_digest(&a), token_digest(&a));
        assert_ne!(token_digest(&a), token_digest(&b));
    }
}
