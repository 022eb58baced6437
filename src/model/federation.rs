//! Federation's facts (docs/FEDERATION.md): the key pair of a local actor,
//! a remote actor as last fetched, and the rules on the ids and names
//! that come from other servers.

/// Which local thing an actor stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActorKind {
    /// A community, published as an ActivityPub `Group`.
    Community,
    /// A user, published as a `Person`.
    User,
    /// The site itself, an `Application` that signs fetches (local id 0).
    Site,
}

impl ActorKind {
    /// The number stored for it (`ap_keys.kind`).
    pub fn code(self) -> i64 {
        match self {
            ActorKind::Community => 0,
            ActorKind::User => 1,
            ActorKind::Site => 2,
        }
    }
}

/// A local actor's RSA key pair, both halves PEM: the private key as
/// PKCS#8, the public key as SPKI (what `publicKeyPem` carries).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActorKey {
    pub private_pem: String,
    pub public_pem: String,
}

/// A remote actor as last fetched: where to deliver to it and the key
/// its signatures are checked with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteActor {
    /// Its id, an https (or, with --federation-allow-private, http) URL.
    pub id: String,
    /// Its inbox.
    pub inbox: String,
    /// Its server's shared inbox, when it has one: one delivery there
    /// reaches every follower on that server.
    pub shared_inbox: Option<String>,
    /// The `publicKey.id` its signatures name in `keyId`.
    pub key_id: String,
    pub public_key_pem: String,
    /// `preferredUsername`, shown as `name@host`.
    pub name: String,
    /// When it was fetched (seconds); a failed signature fetches it again.
    pub fetched_at: i64,
    /// Its profile page at home (the document's `url`, on its own host),
    /// which a remote user's profile links to; `None`: its id.
    pub url: Option<String>,
}

/// The signer of an inbound request as the store knows it: its actor,
/// and the user it acts as here when one was made and not deleted (read
/// in the same query, so an activity costs one read for both).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KnownActor {
    pub actor: RemoteActor,
    pub user: Option<super::User>,
}

impl RemoteActor {
    /// `name@host`, how a remote actor is shown.
    pub fn handle(&self) -> String {
        format!("{}@{}", self.name, host_of(&self.id).unwrap_or("?"))
    }

    /// The name of the user it acts as (`remote_user_name`).
    pub fn user_name(&self) -> String {
        remote_user_name(&self.name, host_of(&self.id).unwrap_or("unknown"))
    }
}

/// A topic or post that a remote object became (or one of ours that a
/// remote activity names), with the topic it is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalObject {
    pub target: crate::model::VoteTarget,
    pub topic_id: i64,
}

/// Whether a user name is a remote user's: `name@host`. A local name
/// never holds an '@' (`Username::parse`), so the two cannot meet, and no
/// local account can take or pass for a remote one.
pub fn is_remote_name(name: &str) -> bool {
    name.contains('@')
}

/// A remote user's name, `name@host`: the actor's `preferredUsername`
/// kept to ASCII letters, digits, '_', '-' and '.' (anything else
/// dropped; `user` when none is left), cut so the whole fits the 64 bytes
/// the pages and the API take as a name (unless the host alone does
/// not), then its host lowercased. Safe in a URL path and in a page as it
/// stands.
pub fn remote_user_name(preferred: &str, host: &str) -> String {
    let room = 64usize.saturating_sub(host.len() + 1).max(8);
    let mut name: String =
        preferred.chars().filter(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')).take(room).collect();
    if name.is_empty() {
        name = "user".into();
    }
    format!("{name}@{}", host.to_ascii_lowercase())
}

/// An activity to deliver to one inbox, signed by a local actor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewDelivery {
    pub inbox: String,
    /// The activity, as sent.
    pub body: String,
    pub signer: ActorKind,
    /// The signing community's or user's id (0 for the site).
    pub signer_id: i64,
    /// The `keyId` the signature names.
    pub key_id: String,
}

/// A delivery taken from the queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuedDelivery {
    pub id: i64,
    pub delivery: NewDelivery,
    /// Tries so far.
    pub attempts: i64,
    pub created_at: i64,
}

impl ActorKind {
    /// The kind stored as `code`.
    pub fn from_code(code: i64) -> Option<ActorKind> {
        match code {
            0 => Some(ActorKind::Community),
            1 => Some(ActorKind::User),
            2 => Some(ActorKind::Site),
            _ => None,
        }
    }
}

/// How long a delivery is retried before it is given up.
pub const DELIVERY_GIVE_UP_SECS: i64 = 2 * 86_400;

/// When a delivery that failed its `attempts`-th try (1 for the first)
/// is tried again: a minute, doubling each time, at most six hours apart;
/// `None` once two days have passed since it was queued.
pub fn retry_at(now: i64, created_at: i64, attempts: i64) -> Option<i64> {
    let delay = (60_i64 << attempts.clamp(1, 20).saturating_sub(1)).min(6 * 3600);
    let at = now + delay;
    (at - created_at <= DELIVERY_GIVE_UP_SECS).then_some(at)
}

/// Each inbox once: a follower with a shared inbox is reached through
/// it, once per server however many of its actors follow.
pub fn inboxes<'a>(actors: impl IntoIterator<Item = &'a RemoteActor>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for a in actors {
        let inbox = a.shared_inbox.clone().unwrap_or_else(|| a.inbox.clone());
        if !out.contains(&inbox) {
            out.push(inbox);
        }
    }
    out
}

/// The host (with port) of an `http(s)://` URL.
pub fn host_of(url: &str) -> Option<&str> {
    let rest = url.strip_prefix("https://").or_else(|| url.strip_prefix("http://"))?;
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let host = &rest[..end];
    (!host.is_empty() && !host.contains('@')).then_some(host)
}

/// Whether two URLs are on the same host: an activity's actor must be on
/// the host of the key that signed it, and an object on its actor's.
pub fn same_host(a: &str, b: &str) -> bool {
    matches!((host_of(a), host_of(b)), (Some(x), Some(y)) if x.eq_ignore_ascii_case(y))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_of_a_url_keeps_its_port_and_drops_its_path() {
        assert_eq!(host_of("https://lemmy.example/u/a#main-key"), Some("lemmy.example"));
        assert_eq!(host_of("http://127.0.0.1:8080/users/a"), Some("127.0.0.1:8080"));
        assert_eq!(host_of("ftp://x/y"), None);
        assert_eq!(host_of("https://user@evil/"), None);
    }

    #[test]
    fn retries_back_off_from_a_minute_and_stop_after_two_days() {
        assert_eq!(retry_at(1000, 1000, 1), Some(1060));
        assert_eq!(retry_at(1000, 1000, 2), Some(1120));
        assert_eq!(retry_at(1000, 1000, 30), Some(1000 + 6 * 3600));
        assert_eq!(retry_at(1000 + DELIVERY_GIVE_UP_SECS, 1000, 3), None);
    }

    #[test]
    fn followers_on_one_server_share_one_delivery() {
        let actor = |id: &str, shared: Option<&str>| RemoteActor {
            id: id.into(),
            inbox: format!("{id}/inbox"),
            shared_inbox: shared.map(str::to_owned),
            key_id: String::new(),
            public_key_pem: String::new(),
            name: String::new(),
            fetched_at: 0,
            url: None,
        };
        let list = [
            actor("https://a.example/u/1", Some("https://a.example/inbox")),
            actor("https://a.example/u/2", Some("https://a.example/inbox")),
            actor("https://b.example/u/1", None),
        ];
        assert_eq!(inboxes(&list), ["https://a.example/inbox", "https://b.example/u/1/inbox"]);
    }

    #[test]
    fn a_remote_users_name_keeps_only_safe_characters_and_its_host() {
        assert_eq!(remote_user_name("alice", "Lemmy.Example:8080"), "alice@lemmy.example:8080");
        assert_eq!(remote_user_name("<b>ev il</b>/../", "a.example"), "bevilb..@a.example");
        assert_eq!(remote_user_name("ü", "a.example"), "user@a.example");
        assert_eq!(remote_user_name(&"x".repeat(100), "a.example").len(), 64);
        assert!(is_remote_name(&remote_user_name("x", "a.example")));
        assert!(crate::model::Username::parse("alice@a.example").is_err(), "no local name takes an '@'");
    }

    #[test]
    fn hosts_compare_without_case_and_with_ports() {
        assert!(same_host("https://A.example/u/a", "https://a.example/inbox"));
        assert!(!same_host("http://127.0.0.1:1/a", "http://127.0.0.1:2/a"));
    }
}
