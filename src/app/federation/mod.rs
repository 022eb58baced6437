//! Federation over ActivityPub, phase 1 (docs/FEDERATION.md): the
//! settings, the ids local actors and objects have, the actors' keys
//! (`keys`), HTTP signatures (`signature`), outbound HTTP to other
//! servers (`client`), the delivery queue's sender (`queue`), remote
//! actors fetched and cached (`actors`), which servers may federate
//! (`instances`), what a remote `Follow` or `Undo` does (`follow`), what a
//! remote user's `Create`, `Update`, `Delete`, `Like` and `Dislike` do
//! (`inbound`, with `content` for their text, and `known` for what they
//! need of the store kept in memory), what local writes send
//! out (`outbound`), and local users joining communities on other
//! servers (`join`, phase 2). The routes that serve all this are
//! `crate::activitypub`'s.

pub mod actors;
pub mod client;
pub mod content;
pub mod follow;
pub mod inbound;
pub mod instances;
pub mod join;
pub mod keys;
pub mod known;
pub mod objects;
pub mod outbound;
pub mod queue;
pub mod signature;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::metrics::config::Switch;

/// Federation's settings (flattened into `ServeConfig`).
#[derive(Debug, Clone, clap::Args)]
pub struct FederationConfig {
    /// Federate over ActivityPub (docs/FEDERATION.md): `on` publishes the
    /// communities and users as actors under --public-url (WebFinger,
    /// NodeInfo, `/ap/...`) and takes follows; `off` answers 404 on every
    /// federation route.
    #[arg(long = "federation", env = "PITH_FEDERATION", value_enum, default_value = "off")]
    pub federation: Switch,

    /// Let federation fetch from and deliver to private, loopback and
    /// link-local addresses, and plain http. For tests on one machine;
    /// never on a public server (a remote actor could make the server
    /// fetch from the local network).
    #[arg(long, env = "PITH_FEDERATION_ALLOW_PRIVATE", default_value_t = false, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub federation_allow_private: bool,
}

impl Default for FederationConfig {
    fn default() -> Self {
        FederationConfig { federation: Switch::Off, federation_allow_private: false }
    }
}

/// Set once, by `pith serve` (or a test), only when federation is on:
/// unset, every federation route answers 404.
#[derive(Default)]
pub struct FederationSettings(OnceLock<Arc<Federation>>);

/// Federation when on.
pub struct Federation {
    /// Outbound HTTP: fetches of actors, deliveries.
    pub client: client::Client,
    /// Wakes the delivery queue's sender when something is queued.
    pub wake: queue::Wake,
    /// The administrators' rules for other servers, as last read.
    pub instances: instances::Instances,
    /// --federation-allow-private: other servers may be on loopback and
    /// plain http (tests on one machine).
    pub allow_private: bool,
    /// What inbound activities need of the store, kept in memory.
    pub known: known::Known,
}

impl FederationSettings {
    pub fn set(&self, cfg: &FederationConfig) {
        if cfg.federation == Switch::On {
            let limits = client::Limits { allow_private: cfg.federation_allow_private, ..client::Limits::default() };
            let fed = Federation {
                client: client::Client::new(limits),
                wake: queue::Wake::default(),
                instances: instances::Instances::default(),
                allow_private: cfg.federation_allow_private,
                known: known::Known::default(),
            };
            let _ = self.0.set(Arc::new(fed));
        }
    }

    /// Federation, or `None` when it is off.
    pub fn get(&self) -> Option<&Arc<Federation>> {
        self.0.get()
    }

    /// Federation, or the 404 an unknown route answers when it is off:
    /// for every door that only exists with federation on.
    pub fn required(&self) -> crate::app::AppResult<Arc<Federation>> {
        self.0.get().cloned().ok_or_else(|| crate::app::AppError::NotFound("federation".into()))
    }
}

/// Turns federation on when `cfg` says so, and starts the delivery
/// queue's sender (which runs until the runtime stops).
pub fn start<S: crate::store::Store>(state: &crate::app::AppState<S>, cfg: &FederationConfig) {
    state.federation.set(cfg);
    if let Some(fed) = state.federation.get() {
        queue::start(state, fed.clone());
    }
}

/// How long an outbound request (connect, send, read the answer) may take.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// The ids of local actors and objects: stable `/ap/...` URLs under the
/// site's public address, apart from the HTML pages (docs/FEDERATION.md,
/// "Ids").
pub mod ids {
    pub fn community(base: &str, name: &str) -> String {
        format!("{base}/ap/c/{name}")
    }
    pub fn user(base: &str, name: &str) -> String {
        format!("{base}/ap/u/{name}")
    }
    /// The site's own actor (an `Application`), which signs fetches.
    pub fn site(base: &str) -> String {
        format!("{base}/ap/site")
    }
    pub fn topic(base: &str, id: i64) -> String {
        format!("{base}/ap/t/{id}")
    }
    /// A post's `Note`, under its topic.
    pub fn note(base: &str, topic: i64, post: i64) -> String {
        format!("{base}/ap/t/{topic}/p/{post}")
    }
    pub fn shared_inbox(base: &str) -> String {
        format!("{base}/ap/inbox")
    }
    /// An actor's key, as `keyId` names it.
    pub fn key(actor: &str) -> String {
        format!("{actor}#main-key")
    }
}
