//! Sending mail: the SMTP settings (`--smtp-url`, `--mail-from`...), what
//! the rest of the app asks of them (is mail on, is an address required),
//! and the background task `pith serve` starts that drains the outbox
//! and queues notification digests. Requests only ever queue mail in the
//! store: a slow or dead SMTP server delays the mail, never a request.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Context;
use lettre::message::Mailbox;
use lettre::message::header::ContentType;
use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::client::{Tls, TlsParameters};
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};

use super::AppState;
use crate::model::Timestamp;
use crate::model::mail::{Delivery, OutMail};
use crate::store::Store;

/// `pith serve`'s mail settings. None is required: with no `--smtp-url`
/// the forum sends no mail and nothing else changes.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct MailConfig {
    /// The SMTP server mail goes through: `smtp://HOST[:PORT]` (port 25;
    /// STARTTLS when the server offers it), `smtp+starttls://HOST[:PORT]`
    /// (port 587; STARTTLS required), or `smtps://HOST[:PORT]` (port 465;
    /// TLS from the first byte). `USER:PASSWORD@` before the host logs in
    /// (percent-encode special characters). Unset: no mail is sent.
    #[arg(long, env = "PITH_SMTP_URL", value_parser = parse_smtp_url)]
    pub smtp_url: Option<String>,

    /// A file holding the SMTP password (its first line), kept out of the
    /// URL, the environment and `pith config`; the user name stays in the
    /// URL.
    #[arg(long, env = "PITH_SMTP_PASSWORD_FILE")]
    pub smtp_password_file: Option<PathBuf>,

    /// The sender of every mail, `forum@example.org` or
    /// `"Forum <forum@example.org>"`; required with --smtp-url.
    #[arg(long, env = "PITH_MAIL_FROM", value_parser = parse_mail_from)]
    pub mail_from: Option<String>,

    /// Registration takes an email address, and a new account cannot log
    /// in until the link mailed to it is followed. Needs --smtp-url.
    #[arg(long, env = "PITH_REQUIRE_EMAIL", default_value_t = false, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub require_email: bool,

    /// Seconds before a failed delivery is tried again; each further
    /// failure doubles it (up to an hour), and a mail is given up after
    /// 10 attempts.
    #[arg(long, env = "PITH_MAIL_RETRY_SECS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub mail_retry_secs: u64,

    /// Seconds between looks at the outbox and at due digests (new mail
    /// from this node is sent at once).
    #[arg(long, env = "PITH_MAIL_POLL_SECS", default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=300))]
    pub mail_poll_secs: u64,
}

/// Attempts before a mail is marked failed.
pub const MAX_ATTEMPTS: i64 = 10;
/// How long a sender holds a claimed mail before another may try it: far
/// longer than one delivery may take (`SMTP_TIMEOUT`).
const LEASE_SECS: i64 = 300;
const SMTP_TIMEOUT: Duration = Duration::from_secs(30);
/// Mails taken from the outbox at a time.
const BATCH: usize = 20;

/// `--smtp-url`: one of the three schemes, a host, no path.
pub fn parse_smtp_url(s: &str) -> Result<String, String> {
    smtp_parts(s).map(|_| s.trim().to_owned())
}

/// How to reach the server.
#[derive(Debug, Clone, PartialEq, Eq)]
struct SmtpParts {
    host: String,
    port: u16,
    tls: TlsMode,
    user: Option<String>,
    password: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TlsMode {
    Opportunistic,
    StartTls,
    Implicit,
}

fn smtp_parts(s: &str) -> Result<SmtpParts, String> {
    let bad = |why: &str| format!("`{}` is not an SMTP URL like smtp://mail.example.org:25: {why}", mask(s));
    let url = url::Url::parse(s.trim()).map_err(|_| bad("it does not parse as a URL"))?;
    let (tls, default_port) = match url.scheme() {
        "smtp" => (TlsMode::Opportunistic, 25),
        "smtp+starttls" => (TlsMode::StartTls, 587),
        "smtps" => (TlsMode::Implicit, 465),
        _ => return Err(bad("the scheme must be smtp, smtp+starttls or smtps")),
    };
    let host = url.host_str().filter(|h| !h.is_empty()).ok_or_else(|| bad("it has no host"))?;
    if !matches!(url.path(), "" | "/") || url.query().is_some() {
        return Err(bad("it must have no path or query"));
    }
    let decode = |v: &str| percent_decode(v).ok_or_else(|| bad("its user or password is badly percent-encoded"));
    let user = Some(url.username()).filter(|u| !u.is_empty()).map(decode).transpose()?;
    let password = url.password().map(decode).transpose()?;
    Ok(SmtpParts {
        host: host.trim_start_matches('[').trim_end_matches(']').to_owned(),
        port: url.port().unwrap_or(default_port),
        tls,
        user,
        password,
    })
}

fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

fn mask(s: &str) -> String {
    crate::settings::mask_password(s, "(hidden)")
}

/// `--mail-from`: a mailbox lettre accepts.
pub fn parse_mail_from(s: &str) -> Result<String, String> {
    s.trim().parse::<Mailbox>().map(|_| s.trim().to_owned()).map_err(|e| format!("`{s}` is not a mail address: {e}"))
}

/// What the app's operations ask about mail; set by `start`.
#[derive(Debug, Default)]
pub struct MailSettings {
    /// An SMTP server is configured: reset and verification links go out.
    enabled: AtomicBool,
    /// `--require-email`.
    require_email: AtomicBool,
    /// Wakes the sender when this node queued mail.
    wake: tokio::sync::Notify,
}

impl MailSettings {
    pub fn enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    pub fn require_email(&self) -> bool {
        self.require_email.load(Ordering::Relaxed)
    }

    /// Tells the sender that mail was queued.
    pub fn wake(&self) {
        self.wake.notify_one();
    }
}

/// The transport and sender address built from the settings.
struct Mailer {
    transport: AsyncSmtpTransport<Tokio1Executor>,
    from: Mailbox,
    retry: Duration,
    poll: Duration,
}

impl Mailer {
    fn new(cfg: &MailConfig, url: &str) -> anyhow::Result<Mailer> {
        let parts = smtp_parts(url).map_err(anyhow::Error::msg)?;
        let from = cfg.mail_from.as_deref().context("--smtp-url needs --mail-from, the sender of every mail")?;
        let from: Mailbox = from.parse().with_context(|| format!("--mail-from `{from}`"))?;
        let password = match &cfg.smtp_password_file {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("cannot read --smtp-password-file {}", path.display()))?;
                Some(text.lines().next().unwrap_or_default().to_owned())
            }
            None => parts.password.clone(),
        };
        let params = || TlsParameters::new(parts.host.clone()).context("TLS settings for the SMTP server");
        let tls = match parts.tls {
            TlsMode::Opportunistic => Tls::Opportunistic(params()?),
            TlsMode::StartTls => Tls::Required(params()?),
            TlsMode::Implicit => Tls::Wrapper(params()?),
        };
        let mut builder = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(parts.host.as_str())
            .port(parts.port)
            .tls(tls)
            .timeout(Some(SMTP_TIMEOUT));
        if let Some(user) = parts.user {
            builder = builder.credentials(Credentials::new(user, password.unwrap_or_default()));
        }
        Ok(Mailer {
            transport: builder.build(),
            from,
            retry: Duration::from_secs(cfg.mail_retry_secs.max(1)),
            poll: Duration::from_secs(cfg.mail_poll_secs.max(1)),
        })
    }

    async fn send(&self, mail: &OutMail) -> Result<(), String> {
        let to: Mailbox = mail.to.parse().map_err(|e| format!("bad recipient: {e}"))?;
        let message = Message::builder()
            .from(self.from.clone())
            .to(to)
            .subject(mail.subject.clone())
            .header(ContentType::TEXT_PLAIN)
            .body(mail.body.clone())
            .map_err(|e| format!("cannot build the message: {e}"))?;
        self.transport.send(message).await.map(drop).map_err(|e| e.to_string())
    }

    /// When to try again after `attempts` failures, or `None` to give up.
    fn backoff(&self, attempts: i64) -> Option<Duration> {
        (attempts < MAX_ATTEMPTS).then(|| {
            let factor = 1u32 << (attempts - 1).clamp(0, 16);
            (self.retry * factor).min(Duration::from_secs(3600))
        })
    }
}

/// Applies the mail settings and, when an SMTP server is configured,
/// starts the sender; refuses settings that cannot work (an address
/// required with no way to mail it).
pub fn start<S: Store>(state: &AppState<S>, cfg: &MailConfig) -> anyhow::Result<Option<tokio::task::JoinHandle<()>>> {
    let Some(url) = cfg.smtp_url.as_deref() else {
        anyhow::ensure!(!cfg.require_email, "--require-email needs --smtp-url: the verification links go by mail");
        return Ok(None);
    };
    let mailer = Mailer::new(cfg, url)?;
    state.mail.enabled.store(true, Ordering::Relaxed);
    state.mail.require_email.store(cfg.require_email, Ordering::Relaxed);
    tracing::info!(server = %mask(url), from = %mailer.from, "sending mail");
    let state = state.clone();
    Ok(Some(tokio::spawn(async move { run(state, mailer).await })))
}

/// The sender's loop: queue due digests, send what is due, then sleep
/// until woken or the poll interval passes.
async fn run<S: Store>(state: AppState<S>, mailer: Mailer) {
    loop {
        let now = Timestamp::now();
        if let Err(e) = state.store.queue_digests(now, state.web.public_url()).await {
            tracing::warn!(error = %e, "could not queue notification digests");
        }
        loop {
            let batch = match state.store.claim_mail(Timestamp::now(), LEASE_SECS, BATCH).await {
                Ok(batch) => batch,
                Err(e) => {
                    tracing::warn!(error = %e, "could not read the outbox");
                    break;
                }
            };
            let full = batch.len() == BATCH;
            for mail in batch {
                deliver(&state, &mailer, mail).await;
            }
            if !full {
                break;
            }
        }
        match state.store.outbox_counts().await {
            Ok((queued, failed)) => state.metrics.set_outbox(queued, failed),
            Err(e) => tracing::debug!(error = %e, "could not count the outbox"),
        }
        let _ = tokio::time::timeout(mailer.poll, state.mail.wake.notified()).await;
    }
}

async fn deliver<S: Store>(state: &AppState<S>, mailer: &Mailer, mail: OutMail) {
    let outcome = match mailer.send(&mail).await {
        Ok(()) => {
            state.metrics.mail_sent();
            Delivery::Sent
        }
        Err(error) => match mailer.backoff(mail.attempts + 1) {
            Some(wait) => {
                tracing::info!(id = mail.id, attempt = mail.attempts + 1, %error, retry_in_secs = wait.as_secs(), "mail not sent yet");
                Delivery::Retry { at: Timestamp(Timestamp::now().0 + wait.as_secs() as i64), error }
            }
            None => {
                tracing::error!(id = mail.id, to = %mail.to, %error, "mail given up after {MAX_ATTEMPTS} attempts");
                state.metrics.mail_failed();
                Delivery::Failed { error }
            }
        },
    };
    if let Err(e) = state.store.finish_mail(mail.id, outcome).await {
        // The claim lapses and the mail is tried again: at worst sent twice.
        tracing::warn!(id = mail.id, error = %e, "could not record a delivery");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_scheme_picks_its_tls_and_default_port() {
        let p = smtp_parts("smtp://mail.example.org").expect("plain");
        assert_eq!((p.port, p.tls, p.user), (25, TlsMode::Opportunistic, None));
        let p = smtp_parts("smtp+starttls://ann:p%40ss@mail.example.org").expect("starttls");
        assert_eq!((p.port, p.tls), (587, TlsMode::StartTls));
        assert_eq!((p.user.as_deref(), p.password.as_deref()), (Some("ann"), Some("p@ss")));
        let p = smtp_parts("smtps://mail.example.org:2465").expect("smtps");
        assert_eq!((p.port, p.tls), (2465, TlsMode::Implicit));
        for bad in ["http://mail.example.org", "smtp://", "smtp://h/path", "mail.example.org"] {
            assert!(smtp_parts(bad).is_err(), "{bad} was accepted");
        }
        let err = smtp_parts("ftp://u:secret@h").expect_err("bad scheme");
        assert!(!err.contains("secret"), "{err}");
    }
}
