//! Two-factor login with TOTP (RFC 6238: six digits, 30-second steps,
//! HMAC-SHA1, one step of clock skew either way), through `totp-rs`.
//!
//! Enrolling: `start` makes a secret and shows it (as text, an otpauth://
//! URL and a QR code drawn here as an SVG `data:` URL, no outside
//! service); `confirm` turns it on once the user proves their app has it
//! with a code, and hands out ten one-use recovery codes, of which only
//! SHA-256 digests are kept. `disable` takes the password and a code.
//!
//! A login with 2FA on needs a code (`verify`): a TOTP code works once
//! (its step is recorded, so a code seen in transit cannot be replayed),
//! a recovery code once. A wrong code counts as one more login attempt.

use axum::http::StatusCode;
use base64::Engine;
use rand::Rng;
use serde::Serialize;

use super::limits::{Action, ClientIp, Who};
use super::{AppError, AppResult, AppState, AuthUser};
use crate::model::{Timestamp, User};
use crate::store::Store;

/// The name authenticator apps show beside the account.
const ISSUER: &str = "Pith";
/// Bytes of secret: 160 bits, as RFC 4226 recommends.
const SECRET_BYTES: usize = 20;
/// How many recovery codes an enrolment hands out.
pub const RECOVERY_CODES: usize = 10;

/// What `start` shows the user to set up their app.
#[derive(Debug, Serialize)]
pub struct Enrolment {
    /// The secret in base32, to type in by hand.
    pub secret: String,
    /// `otpauth://totp/Pith:NAME?secret=...&issuer=Pith`.
    pub otpauth_url: String,
    /// The URL as a QR code: `data:image/svg+xml;base64,...`.
    pub qr: String,
}

fn totp(secret: Vec<u8>, account: &str) -> AppResult<totp_rs::Totp> {
    totp_rs::Builder::new()
        .with_secret(secret)
        .with_account_name(account)
        .with_issuer(Some(ISSUER))
        .build()
        .map_err(|e| AppError::Internal(format!("totp: {e}")))
}

fn rejected(status: StatusCode, code: &'static str, message: &str) -> AppError {
    AppError::Rejected(status, code, message.into())
}

/// Starts (or restarts) an enrolment; 409 `two_factor_on` when it is on.
pub async fn start<S: Store>(state: &AppState<S>, auth: &AuthUser) -> AppResult<Enrolment> {
    if state.store.two_factor(auth.user.id).await?.secret.is_some() {
        return Err(rejected(StatusCode::CONFLICT, "two_factor_on", "two-factor login is already on"));
    }
    let mut secret = vec![0u8; SECRET_BYTES];
    rand::rng().fill(&mut secret[..]);
    state.store.begin_totp(auth.user.id, secret.clone()).await?;
    enrolment(secret, &auth.user.name)
}

fn enrolment(secret: Vec<u8>, account: &str) -> AppResult<Enrolment> {
    let totp = totp(secret, account)?;
    let otpauth_url = totp.to_url().map_err(|e| AppError::Internal(format!("totp: {e}")))?;
    Ok(Enrolment { secret: totp.secret().to_base32(), qr: qr_data_url(&otpauth_url)?, otpauth_url })
}

/// The account's two-factor login as its settings page shows it.
#[derive(Debug)]
pub struct View {
    pub enabled: bool,
    pub recovery_left: i64,
    /// An enrolment started and not confirmed yet (2FA off).
    pub enrolment: Option<Enrolment>,
}

pub async fn view<S: Store>(state: &AppState<S>, user: &User) -> AppResult<View> {
    let tf = state.store.two_factor(user.id).await?;
    let enrolment = match (&tf.secret, tf.pending) {
        (None, Some(pending)) => Some(enrolment(pending, &user.name)?),
        _ => None,
    };
    Ok(View { enabled: tf.secret.is_some(), recovery_left: tf.recovery_left, enrolment })
}

/// Confirms the enrolment with a code from the app; turns 2FA on and
/// returns the recovery codes (shown once). 409 `no_enrolment` without a
/// started one, 403 `totp_invalid` for a wrong code.
pub async fn confirm<S: Store>(state: &AppState<S>, auth: &AuthUser, code: &str) -> AppResult<Vec<String>> {
    let state2 = state.store.two_factor(auth.user.id).await?;
    let Some(pending) = state2.pending else {
        return Err(rejected(StatusCode::CONFLICT, "no_enrolment", "start an enrolment first"));
    };
    let step = totp(pending.clone(), &auth.user.name)?
        .check(&digits(code), now())
        .ok_or_else(|| rejected(StatusCode::FORBIDDEN, "totp_invalid", "that code is wrong or expired"))?;
    let codes: Vec<String> = (0..RECOVERY_CODES).map(|_| recovery_code()).collect();
    let digests = codes.iter().map(|c| super::auth::token_digest(&normalise(c))).collect();
    if !state.store.enable_totp(auth.user.id, pending, step as i64, digests).await? {
        return Err(AppError::Conflict("the enrolment changed meanwhile; start again".into()));
    }
    Ok(codes)
}

/// Turns 2FA off, given the password and a code (or a recovery code).
pub async fn disable<S: Store>(
    state: &AppState<S>,
    ip: ClientIp,
    auth: &AuthUser,
    password: String,
    code: &str,
) -> AppResult<()> {
    super::sessions::check_password(state, ip, &auth.user, password).await?;
    let Some(secret) = state.store.two_factor(auth.user.id).await?.secret else {
        return Err(rejected(StatusCode::CONFLICT, "two_factor_off", "two-factor login is not on"));
    };
    if !verify(state, &auth.user, secret, code).await? {
        let _ = state.limits.check(Action::Login, ip, Who::Name(&auth.user.name));
        return Err(rejected(StatusCode::FORBIDDEN, "totp_invalid", "that code is wrong, expired or used"));
    }
    Ok(state.store.disable_totp(auth.user.id).await?)
}

/// The second step of a login whose password was right: passes when 2FA
/// is off, or `code` is a good one. 401 `totp_required` without a code,
/// 401 `totp_invalid` for a wrong one, which counts as one more attempt
/// against the login limits.
pub async fn check_login<S: Store>(
    state: &AppState<S>,
    ip: ClientIp,
    user: &User,
    code: Option<&str>,
) -> AppResult<()> {
    check_code(state, ip, user, code, StatusCode::UNAUTHORIZED).await
}

/// The same check before an irreversible act of a signed-in user (deleting
/// the account): a stolen session and password are not enough while 2FA
/// is on. Refused 403, as the request itself is authenticated.
pub async fn check_signed_in<S: Store>(
    state: &AppState<S>,
    ip: ClientIp,
    user: &User,
    code: Option<&str>,
) -> AppResult<()> {
    check_code(state, ip, user, code, StatusCode::FORBIDDEN).await
}

async fn check_code<S: Store>(
    state: &AppState<S>,
    ip: ClientIp,
    user: &User,
    code: Option<&str>,
    status: StatusCode,
) -> AppResult<()> {
    let Some(secret) = state.store.two_factor(user.id).await?.secret else { return Ok(()) };
    let code = code
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .ok_or_else(|| rejected(status, "totp_required", "enter the code from your authenticator app"))?;
    if verify(state, user, secret, code).await? {
        return Ok(());
    }
    let _ = state.limits.check(Action::Login, ip, Who::Name(&user.name));
    Err(rejected(status, "totp_invalid", "that code is wrong, expired or used"))
}

/// Whether `code` is a TOTP code of `secret` not used before, or one of
/// the user's recovery codes (then used up).
async fn verify<S: Store>(state: &AppState<S>, user: &User, secret: Vec<u8>, code: &str) -> AppResult<bool> {
    if code.len() > 64 {
        return Ok(false);
    }
    let six = digits(code);
    if six.len() == 6 && six.len() == code.chars().filter(|c| !c.is_whitespace()).count() {
        return match totp(secret, &user.name)?.check(&six, now()) {
            Some(step) => Ok(state.store.use_totp_step(user.id, step as i64).await?),
            None => Ok(false),
        };
    }
    Ok(state.store.use_recovery_code(user.id, super::auth::token_digest(&normalise(code))).await?)
}

fn now() -> u64 {
    Timestamp::now().0.max(0) as u64
}

/// A code as typed, without spaces ("123 456" is "123456").
fn digits(code: &str) -> String {
    code.chars().filter(|c| !c.is_whitespace()).collect()
}

/// A recovery code as it is hashed: lowercase, without spaces or dashes.
fn normalise(code: &str) -> String {
    code.chars().filter(|c| c.is_ascii_alphanumeric()).map(|c| c.to_ascii_lowercase()).collect()
}

/// Ten characters of an alphabet without look-alikes (50 bits), shown
/// as two groups of five.
fn recovery_code() -> String {
    const ALPHABET: &[u8] = b"abcdefghjkmnpqrstuvwxyz23456789";
    let mut rng = rand::rng();
    let mut code: String = (0..10).map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char).collect();
    code.insert(5, '-');
    code
}

/// The URL as a QR code, an SVG image in a `data:` URL.
fn qr_data_url(url: &str) -> AppResult<String> {
    use qrcodegen::{QrCode, QrCodeEcc};
    let qr = QrCode::encode_text(url, QrCodeEcc::Medium).map_err(|e| AppError::Internal(format!("qr: {e:?}")))?;
    let (size, border) = (qr.size(), 4);
    let mut path = String::new();
    for y in 0..size {
        for x in 0..size {
            if qr.get_module(x, y) {
                path += &format!("M{},{}h1v1h-1z", x + border, y + border);
            }
        }
    }
    let side = size + 2 * border;
    let svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {side} {side}\" shape-rendering=\"crispEdges\">\
         <rect width=\"100%\" height=\"100%\" fill=\"#fff\"/><path d=\"{path}\" fill=\"#000\"/></svg>"
    );
    Ok(format!("data:image/svg+xml;base64,{}", base64::engine::general_purpose::STANDARD.encode(svg)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recovery_codes_are_two_groups_of_five_and_normalise_to_ten_characters() {
        let code = recovery_code();
        assert_eq!(code.len(), 11);
        assert_eq!(code.as_bytes()[5], b'-');
        assert_eq!(normalise(&code.to_uppercase()).len(), 10);
        assert_eq!(normalise(&code), normalise(&format!(" {} ", code.replace('-', " "))));
    }

    #[test]
    fn the_qr_code_is_an_svg_data_url() {
        let url = qr_data_url("otpauth://totp/Pith:ann?secret=ABC&issuer=Pith").expect("qr");
        assert!(url.starts_with("data:image/svg+xml;base64,"));
    }

    #[test]
    fn a_code_of_the_current_step_checks_and_gives_that_step() {
        let totp = totp(vec![7; SECRET_BYTES], "ann").expect("totp");
        let code = totp.generate(1_800_000_000);
        assert_eq!(totp.check(&code.to_string(), 1_800_000_000), Some(1_800_000_000 / 30));
    }
}
