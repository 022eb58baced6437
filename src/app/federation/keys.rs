//! Actors' RSA keys: made with the `rsa` crate (generation only, which no
//! remote party can time), used with ring. Signing is a private-key
//! operation, so it is ring's constant-time code, not `rsa`'s (whose
//! RUSTSEC-2023-0071 is a timing leak in exactly those operations);
//! `rsa` only reads remote actors' public keys, to hand ring the PKCS#1
//! form it verifies with. docs/FEDERATION.md, "Crypto".

use std::num::NonZeroUsize;
use std::sync::{Arc, LazyLock, Mutex};

use lru::LruCache;
use ring::signature::{RSA_PKCS1_2048_8192_SHA256, RSA_PKCS1_SHA256, RsaKeyPair, UnparsedPublicKey};
use rsa::pkcs1::{DecodeRsaPublicKey, EncodeRsaPublicKey};
use rsa::pkcs8::{DecodePublicKey, EncodePrivateKey, EncodePublicKey, LineEnding};

use crate::app::{AppError, AppResult, AppState};
use crate::model::federation::{ActorKey, ActorKind};
use crate::store::Store;

/// Bits of every key made here: what Mastodon, Lemmy and Fedify make.
const BITS: usize = 2048;

/// A new key pair (takes a fraction of a second: run it off the runtime).
pub fn generate() -> Result<ActorKey, String> {
    let mut rng = rsa::rand_core::OsRng;
    let private = rsa::RsaPrivateKey::new(&mut rng, BITS).map_err(|e| format!("RSA key generation: {e}"))?;
    let private_pem = private.to_pkcs8_pem(LineEnding::LF).map_err(|e| format!("PKCS#8: {e}"))?.as_str().to_owned();
    let public_pem = private.to_public_key().to_public_key_pem(LineEnding::LF).map_err(|e| format!("SPKI: {e}"))?;
    Ok(ActorKey { private_pem, public_pem })
}

/// The actor's key pair, made and stored the first time it is needed.
pub async fn key_for<S: Store>(state: &AppState<S>, kind: ActorKind, local_id: i64) -> AppResult<ActorKey> {
    key_made_by(state, kind, local_id, generate).await
}

/// `key_for` with the key maker given (a test counts what it makes).
/// One key is made at a time, and a caller that waited for the turn
/// reads the store again first: the first contact with another server
/// asks for the site's key once per remote actor it fetches, dozens at
/// once, and each made its own key (a fraction of a second of a core
/// each here, seconds on a Pi) where one is kept. Keys are made once per
/// actor, so one turn for all of them holds nothing up.
pub async fn key_made_by<S: Store>(
    state: &AppState<S>,
    kind: ActorKind,
    local_id: i64,
    make: fn() -> Result<ActorKey, String>,
) -> AppResult<ActorKey> {
    static MAKING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    if let Some(key) = state.store.actor_key(kind, local_id).await? {
        return Ok(key);
    }
    let _turn = MAKING.lock().await;
    if let Some(key) = state.store.actor_key(kind, local_id).await? {
        return Ok(key);
    }
    let key = tokio::task::spawn_blocking(make)
        .await
        .map_err(|e| AppError::Internal(format!("key task: {e}")))?
        .map_err(AppError::Internal)?;
    Ok(state.store.put_actor_key(kind, local_id, key).await?)
}

/// A private key read once, to sign many requests: reading a PKCS#8 key
/// into ring's form costs about as much as a signature, and a fan-out
/// signs once per inbox with the same key.
pub struct SigningKey(RsaKeyPair);

impl SigningKey {
    pub fn from_pem(private_pem: &str) -> Result<SigningKey, String> {
        let (label, der) = rsa::pkcs8::der::pem::decode_vec(private_pem.as_bytes()).map_err(|e| format!("PEM: {e}"))?;
        if label != "PRIVATE KEY" {
            return Err(format!("expected a PKCS#8 PRIVATE KEY, found {label}"));
        }
        Ok(SigningKey(RsaKeyPair::from_pkcs8(&der).map_err(|e| format!("key: {e}"))?))
    }

    /// Signs `message` with RSASSA-PKCS1-v1_5 over SHA-256 (`rsa-sha256`).
    pub fn sign(&self, message: &[u8]) -> Result<Vec<u8>, String> {
        let mut signature = vec![0; self.0.public().modulus_len()];
        self.0
            .sign(&RSA_PKCS1_SHA256, &ring::rand::SystemRandom::new(), message, &mut signature)
            .map_err(|e| format!("sign: {e}"))?;
        Ok(signature)
    }
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SigningKey(..)")
    }
}

/// Signs `message` with RSASSA-PKCS1-v1_5 over SHA-256 (`rsa-sha256`).
pub fn sign(private_pem: &str, message: &[u8]) -> Result<Vec<u8>, String> {
    SigningKey::from_pem(private_pem)?.sign(message)
}

/// A public key as remote actors publish it (SPKI `PUBLIC KEY` PEM, or
/// PKCS#1 `RSA PUBLIC KEY`), in the PKCS#1 DER ring verifies with.
pub fn public_der(pem: &str) -> Result<Vec<u8>, String> {
    let pem = pem.trim();
    let key = if pem.starts_with("-----BEGIN RSA PUBLIC KEY-----") {
        rsa::RsaPublicKey::from_pkcs1_pem(pem).map_err(|e| format!("PKCS#1 public key: {e}"))?
    } else {
        rsa::RsaPublicKey::from_public_key_pem(pem).map_err(|e| format!("public key: {e}"))?
    };
    Ok(key.to_pkcs1_der().map_err(|e| format!("PKCS#1: {e}"))?.as_bytes().to_vec())
}

/// Remote keys recently verified with, in ring's form, by their PEM text:
/// each activity is verified against its sender's key, and reading the PEM
/// (base64, DER, big integers) and writing it again as PKCS#1 took about
/// half as long as the RSA check itself (docs/PERFORMANCE.md, "Inbound
/// federation"). A key is looked up by its whole text, so a changed key
/// is a different entry; bounded, ~200 KB at most.
const KEYS_KEPT: usize = 256;

/// PKCS#1 DER by PEM text.
type Kept = LruCache<Box<str>, Arc<[u8]>>;

fn cached_der(pem: &str) -> Option<Arc<[u8]>> {
    static KEPT: LazyLock<Mutex<Kept>> =
        LazyLock::new(|| Mutex::new(LruCache::new(NonZeroUsize::new(KEYS_KEPT).unwrap_or(NonZeroUsize::MIN))));
    let kept = || KEPT.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(der) = kept().get(pem) {
        return Some(der.clone());
    }
    // Parsed outside the lock; an unreadable key is not kept.
    let der: Arc<[u8]> = public_der(pem).ok()?.into();
    kept().put(pem.into(), der.clone());
    Some(der)
}

/// Whether `signature` is `rsa-sha256` over `message` by the key `pem`.
pub fn verify(pem: &str, message: &[u8], signature: &[u8]) -> bool {
    match cached_der(pem) {
        Some(der) => UnparsedPublicKey::new(&RSA_PKCS1_2048_8192_SHA256, der).verify(message, signature).is_ok(),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_made_key_signs_what_its_public_half_verifies_and_nothing_else() {
        let key = generate().expect("key");
        assert!(key.private_pem.starts_with("-----BEGIN PRIVATE KEY-----"));
        assert!(key.public_pem.starts_with("-----BEGIN PUBLIC KEY-----"));
        let sig = sign(&key.private_pem, b"(request-target): post /inbox").expect("sign");
        assert!(verify(&key.public_pem, b"(request-target): post /inbox", &sig));
        assert!(!verify(&key.public_pem, b"(request-target): post /other", &sig));
        let other = generate().expect("key");
        assert!(!verify(&other.public_pem, b"(request-target): post /inbox", &sig));
        assert!(!verify("not a key", b"x", &sig));
    }

    #[test]
    fn a_key_verified_with_is_parsed_once_and_kept_by_its_text() {
        let key = generate().expect("key");
        let first = cached_der(&key.public_pem).expect("readable");
        assert_eq!(&first[..], &public_der(&key.public_pem).expect("readable")[..]);
        assert!(Arc::ptr_eq(&first, &cached_der(&key.public_pem).expect("kept")), "kept, not parsed again");
        let other = generate().expect("key");
        assert_ne!(cached_der(&other.public_pem).expect("readable"), first, "another key, another entry");
        assert!(cached_der("-----BEGIN PUBLIC KEY-----\nnot base64\n-----END PUBLIC KEY-----").is_none());
    }
}
