//! The application core: the shared state every door into the forum uses
//! (`App`, `AppState`), the operations of the forum (each takes who acts
//! and a validated input, checks the rules, calls the store and returns its
//! result with a `Change`), and `apply`, the one place a committed
//! `Change` takes effect: cache, live subscribers, cluster bus.
//!
//! - `accounts`: register, log in and out, tokens.
//! - `sessions`: idle limits, the owner's list of sessions and tokens,
//!   revoking them, changing the password.
//! - `topics`, `posts`, `votes`, `moderation`, `communities`: the writes
//!   of the forum.
//! - `saves`: saving topics and posts, blocking communities and users, a
//!   reader's own votes, saves and blocked authors on a topic page.
//! - `inbox`: a user's notifications, their unread count, marking read.
//! - `messages`: private messages, conversations, reported messages;
//!   blocking a user is in `saves`, next to blocking a community.
//! - `media`: picture uploads (processed, stored, recorded within quotas)
//!   and the removal of pictures nothing shows any more; `media_gc`: the
//!   pictures' files and rows brought back in step (`pith media gc`).
//! - `email`: addresses and their verification, password resets by mail,
//!   the digest setting; `mail`: the SMTP settings and the sender that
//!   drains the outbox.
//! - `site`: site settings, invites, the first administrator.
//! - `export`: an account's data as one streamed JSON document;
//!   `deletion`: deleting an account (its owner, or an admin's purge);
//!   `two_factor`: TOTP enrolment, recovery codes, the login's second step.
//! - `read`: a topic's rendered, cached answer; `text`: Markdown rendered
//!   once, in the operation that writes it.
//! - `apply`: a `Change` applied; `bus`: Changes to and from other nodes.
//! - `auth`: passwords, tokens, the token cache, the acting user.
//! - `limits`: rate limits and their settings; `error`: `AppError`.
//! - `web_settings`: what `pith serve` sets for the pages after start;
//!   `housekeeping`: expired sessions and email links deleted hourly.
//! - `federation`: ActivityPub's settings, keys, signatures, outbound
//!   HTTP, remote actors and follows (its routes are `activitypub`'s).

pub mod accounts;
pub mod apply;
pub mod auth;
pub mod bus;
pub mod communities;
pub mod deletion;
pub mod email;
pub mod error;
pub mod export;
pub mod federation;
pub mod housekeeping;
pub mod inbox;
pub mod limits;
pub mod mail;
pub mod media;
pub mod media_gc;
pub mod messages;
pub mod moderation;
pub mod posts;
pub mod read;
pub mod saves;
pub mod sessions;
pub mod site;
pub mod text;
pub mod topics;
pub mod two_factor;
pub mod votes;
pub mod web_settings;

use std::future::Future;
use std::ops::Deref;
use std::sync::Arc;

pub use auth::AuthUser;
pub use error::{AppError, AppResult};
pub use limits::{Action, ClientIp, RateConfig, Who};
pub use sessions::SessionConfig;
pub use web_settings::{WebConfig, WebSettings};

use crate::cache::TopicCache;
use crate::live::LiveConfig;
use crate::store::Store;

pub struct App<S> {
    pub store: S,
    /// Rendered topic responses; evicted by `apply` after writes.
    pub cache: TopicCache,
    /// Token digest -> user, so authenticated writes skip a read.
    pub tokens: auth::TokenCache,
    /// How long sessions and API tokens last unused.
    pub sessions: sessions::SessionSettings,
    /// Live subscribers; `apply` publishes events here.
    pub live: crate::live::Hub,
    /// Per-account and per-address rate limits (429 with Retry-After).
    pub limits: limits::RateLimits,
    /// The HTML forum's settings (secure cookies, the setup link).
    pub web: WebSettings,
    /// Prometheus metrics.
    pub metrics: crate::metrics::Metrics,
    /// Whether mail goes out and registration needs an address (`mail`).
    pub mail: mail::MailSettings,
    /// Where pictures are stored and how they are checked; set at start.
    pub media: media::MediaSettings,
    /// Federation, when `pith serve --federation on` (or a test) sets it.
    pub federation: federation::FederationSettings,
    /// Where committed Changes go for other nodes; unset on a single node.
    pub bus: std::sync::OnceLock<Arc<crate::cluster::Sink>>,
}

/// Cheap to clone: one `Arc`.
pub struct AppState<S>(pub Arc<App<S>>);

impl<S> Clone for AppState<S> {
    fn clone(&self) -> Self {
        AppState(self.0.clone())
    }
}

impl<S> Deref for AppState<S> {
    type Target = App<S>;
    fn deref(&self) -> &App<S> {
        &self.0
    }
}

impl<S: Store> AppState<S> {
    pub fn new(store: S, cache_bytes: usize) -> Self {
        Self::with_live(store, cache_bytes, &LiveConfig::default())
    }

    pub fn with_live(store: S, cache_bytes: usize, live: &LiveConfig) -> Self {
        Self::with_config(store, cache_bytes, live, &RateConfig::default())
    }

    pub fn with_config(store: S, cache_bytes: usize, live: &LiveConfig, rate: &RateConfig) -> Self {
        let cache = TopicCache::new(cache_bytes);
        let metrics = crate::metrics::Metrics::new(store.metrics(), &cache);
        AppState(Arc::new_cyclic(|app| App {
            store,
            cache,
            metrics,
            tokens: auth::TokenCache::new(),
            sessions: sessions::SessionSettings::default(),
            live: crate::live::Hub::new(live, Some(accounts::token_resolver(app.clone()))),
            limits: limits::RateLimits::new(rate),
            web: WebSettings::default(),
            mail: mail::MailSettings::default(),
            media: media::MediaSettings::default(),
            federation: federation::FederationSettings::default(),
            bus: std::sync::OnceLock::new(),
        }))
    }
}

/// Runs a write and what must follow it (`apply`) as its own task, so a
/// client that hangs up mid-request cannot cancel the eviction after the
/// write has committed.
pub async fn commit<S, T, Fut>(state: &AppState<S>, f: impl FnOnce(AppState<S>) -> Fut) -> Result<T, AppError>
where
    S: Store,
    T: Send + 'static,
    Fut: Future<Output = Result<T, AppError>> + Send + 'static,
{
    tokio::spawn(f(state.clone())).await.map_err(|e| AppError::Internal(format!("write task failed: {e}")))?
}
