//! What every inbound activity would otherwise read from the store again,
//! kept in memory (docs/PERFORMANCE.md, "Inbound federation"):
//! - which local communities there are and which community each topic is
//!   in: facts that never change here (communities are never deleted or
//!   renamed, topics never move);
//! - each local community's remote followers, which change only by a
//!   `Change::Followers` (a Follow, its Undo) or a `Change::ActorFetched`
//!   (an actor fetched again, its inbox perhaps moved), applied on every
//!   node like any other change;
//! - signers by key id, with the user each acts as here: forgotten on an
//!   `ActorFetched` (its key perhaps rotated) and on the user's
//!   `AccountDeleted`, and kept a minute at most, as the token cache keeps
//!   a token's user (`app::auth`), for what no change says (an
//!   administrator's role given or taken by `pith user`).
//!
//! Only what the store answered is kept; nothing is assumed absent. A
//! read that overlapped a change is answered but not kept. Each map is
//! bounded (~10 MB in all at most): when full it is emptied and fills
//! again from the store.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::model::Community;
use crate::model::federation::{KnownActor, RemoteActor, is_remote_name};

/// The most communities and topics kept: under 1 MB with long names.
const MAX_ENTRIES: usize = 16_384;

/// The most signers kept (each with its key's PEM, ~1 KB): ~4 MB at most.
const MAX_SIGNERS: usize = 4_096;

/// The most followers kept, over every list (each ~1 KB): ~4 MB at most.
/// A community with more is read from the store at each activity, as
/// before there was this memory.
const MAX_FOLLOWERS: usize = 4_096;

/// How long a signer and its user are kept at most.
const SIGNER_TTL: Duration = Duration::from_secs(60);

/// A community as an activity needs it: which one, and its name (whose
/// form says whether it lives on another server). Unlike `Community`, it
/// holds nothing that changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    pub id: i64,
    pub name: String,
}

impl Place {
    /// Whether it lives on another server and is followed from here.
    pub fn is_remote(&self) -> bool {
        is_remote_name(&self.name)
    }
}

impl From<&Community> for Place {
    fn from(c: &Community) -> Place {
        Place { id: c.id, name: c.name.clone() }
    }
}

#[derive(Default)]
pub struct Known {
    /// Local communities by their name in lower case (names are unique
    /// without regard to ASCII case).
    communities: Mutex<HashMap<String, Place>>,
    topics: Mutex<HashMap<i64, Place>>,
    followers: Mutex<Followers>,
    signers: Mutex<HashMap<String, (KnownActor, Instant)>>,
    /// Counts the changes heard: what was read before one must not be
    /// kept after it.
    changes: AtomicU64,
}

/// Follower lists by community, and how many followers they hold in all.
#[derive(Default)]
struct Followers {
    lists: HashMap<i64, Arc<Vec<RemoteActor>>>,
    held: usize,
}

impl Followers {
    fn remove(&mut self, community_id: i64) {
        if let Some(list) = self.lists.remove(&community_id) {
            self.held -= list.len();
        }
    }

    fn clear(&mut self) {
        self.lists.clear();
        self.held = 0;
    }

    /// Keeps `list` within `MAX_FOLLOWERS` in all: the others are
    /// forgotten when it would not fit beside them; one too long alone is
    /// not kept.
    fn put(&mut self, community_id: i64, list: Arc<Vec<RemoteActor>>) {
        self.remove(community_id);
        if list.len() > MAX_FOLLOWERS {
            return;
        }
        if self.held + list.len() > MAX_FOLLOWERS || self.lists.len() >= MAX_ENTRIES {
            self.clear();
        }
        self.held += list.len();
        self.lists.insert(community_id, list);
    }
}

fn put<K: std::hash::Hash + Eq, V>(map: &Mutex<HashMap<K, V>>, key: K, value: V) {
    let mut map = map.lock().unwrap_or_else(|e| e.into_inner());
    if map.len() >= MAX_ENTRIES && !map.contains_key(&key) {
        map.clear();
    }
    map.insert(key, value);
}

fn get<K, Q, V>(map: &Mutex<HashMap<K, V>>, key: &Q) -> Option<V>
where
    K: std::borrow::Borrow<Q> + std::hash::Hash + Eq,
    Q: std::hash::Hash + Eq + ?Sized,
    V: Clone,
{
    map.lock().unwrap_or_else(|e| e.into_inner()).get(key).cloned()
}

impl Known {
    /// The local community named `name` (any case), read by `read` the
    /// first time.
    pub async fn community<E, F>(&self, name: &str, read: F) -> Result<Place, E>
    where
        F: Future<Output = Result<Community, E>>,
    {
        let key = name.to_ascii_lowercase();
        if let Some(place) = get(&self.communities, key.as_str()) {
            return Ok(place);
        }
        let place = Place::from(&read.await?);
        put(&self.communities, key, place.clone());
        Ok(place)
    }

    /// The community topic `topic_id` is in, read by `read` the first
    /// time.
    pub async fn topic_community<E, F>(&self, topic_id: i64, read: F) -> Result<Place, E>
    where
        F: Future<Output = Result<Community, E>>,
    {
        if let Some(place) = get(&self.topics, &topic_id) {
            return Ok(place);
        }
        let place = Place::from(&read.await?);
        put(&self.topics, topic_id, place.clone());
        Ok(place)
    }

    /// The community's remote followers, read by `read` when not kept. A
    /// list read while a follower change was heard is answered but not
    /// kept: it may be from before that change.
    pub async fn followers<E, F>(&self, community_id: i64, read: F) -> Result<Arc<Vec<RemoteActor>>, E>
    where
        F: Future<Output = Result<Vec<RemoteActor>, E>>,
    {
        if let Some(list) = self.followers.lock().unwrap_or_else(|e| e.into_inner()).lists.get(&community_id) {
            return Ok(list.clone());
        }
        let seen = self.changes.load(Ordering::Acquire);
        let list = Arc::new(read.await?);
        let mut map = self.followers.lock().unwrap_or_else(|e| e.into_inner());
        // Checked under the lock every change takes to forget.
        if self.changes.load(Ordering::Acquire) == seen {
            map.put(community_id, list.clone());
        }
        Ok(list)
    }

    /// The signer whose key is `key_id`, with its user, read by `read`
    /// when not kept or kept over a minute. Kept only with a user: one
    /// without is about to have one made (`inbound::acting_user`).
    pub async fn signer<E, F>(&self, key_id: &str, read: F) -> Result<Option<KnownActor>, E>
    where
        F: Future<Output = Result<Option<KnownActor>, E>>,
    {
        if let Some((known, at)) = get(&self.signers, key_id)
            && at.elapsed() < SIGNER_TTL
        {
            return Ok(Some(known));
        }
        let seen = self.changes.load(Ordering::Acquire);
        let found = read.await?;
        if let Some(known) = found.as_ref().filter(|k| k.user.is_some()) {
            let mut map = self.signers.lock().unwrap_or_else(|e| e.into_inner());
            if self.changes.load(Ordering::Acquire) == seen {
                if map.len() >= MAX_SIGNERS {
                    map.retain(|_, (_, at)| at.elapsed() < SIGNER_TTL);
                    if map.len() >= MAX_SIGNERS {
                        map.clear();
                    }
                }
                map.insert(key_id.to_owned(), (known.clone(), Instant::now()));
            }
        }
        Ok(found)
    }

    /// Counts a change; called with a map's lock held, so a read that
    /// began before it cannot be kept after it (`followers`, `signer`).
    fn changed(&self) {
        self.changes.fetch_add(1, Ordering::AcqRel);
    }

    /// A community's followers changed: its list is forgotten.
    pub fn followers_changed(&self, community_id: i64) {
        let mut map = self.followers.lock().unwrap_or_else(|e| e.into_inner());
        self.changed();
        map.remove(community_id);
    }

    /// The actor `actor_id` was fetched again: its key may have changed,
    /// and its inbox, which any follower list may hold. Its signer entries
    /// and every list are forgotten.
    pub fn actor_fetched(&self, actor_id: &str) {
        {
            let mut map = self.signers.lock().unwrap_or_else(|e| e.into_inner());
            self.changed();
            map.retain(|_, (known, _)| known.actor.id != actor_id);
        }
        let mut map = self.followers.lock().unwrap_or_else(|e| e.into_inner());
        self.changed();
        map.clear();
    }

    /// A user was deleted: a signer acting as it is forgotten (the store
    /// then refuses it).
    pub fn user_deleted(&self, user_id: i64) {
        let mut map = self.signers.lock().unwrap_or_else(|e| e.into_inner());
        self.changed();
        map.retain(|_, (known, _)| known.user.as_ref().is_none_or(|u| u.id != user_id));
    }

    /// Changes may have been lost (the cluster bus said so): everything
    /// that can change is forgotten.
    pub fn clear(&self) {
        {
            let mut map = self.signers.lock().unwrap_or_else(|e| e.into_inner());
            self.changed();
            map.clear();
        }
        let mut map = self.followers.lock().unwrap_or_else(|e| e.into_inner());
        self.changed();
        map.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn community(id: i64, name: &str) -> Community {
        Community {
            id,
            name: name.into(),
            title: String::new(),
            description: String::new(),
            created_at: crate::model::Timestamp(0),
            topic_count: 0,
            home: None,
        }
    }

    fn actor(id: &str) -> RemoteActor {
        RemoteActor {
            id: id.into(),
            inbox: format!("{id}/inbox"),
            shared_inbox: None,
            key_id: format!("{id}#k"),
            public_key_pem: String::new(),
            name: "a".into(),
            fetched_at: 0,
            url: None,
        }
    }

    async fn never<T>() -> Result<T, &'static str> {
        Err("read again")
    }

    #[tokio::test]
    async fn a_community_is_read_once_whatever_the_case_of_its_name() {
        let known = Known::default();
        let read = known.community("Rust", async { Ok::<_, &str>(community(3, "rust")) }).await;
        assert_eq!(read, Ok(Place { id: 3, name: "rust".into() }));
        assert_eq!(known.community("RUST", never()).await, Ok(Place { id: 3, name: "rust".into() }));
        // What the store did not find is not kept.
        assert_eq!(known.community("go", async { Err::<Community, _>("none") }).await, Err("none"));
        assert_eq!(known.community("go", never()).await, Err("read again"));
    }

    #[tokio::test]
    async fn a_topics_community_is_read_once() {
        let known = Known::default();
        let read = known.topic_community(7, async { Ok::<_, &str>(community(3, "rust")) }).await;
        assert_eq!(read.map(|p| p.id), Ok(3));
        assert_eq!(known.topic_community(7, never()).await.map(|p| p.name), Ok("rust".into()));
        assert_eq!(known.topic_community(8, never()).await, Err("read again"));
    }

    #[tokio::test]
    async fn followers_are_read_again_after_a_change_and_a_list_read_across_one_is_not_kept() {
        let known = Known::default();
        let one = vec![actor("https://a.example/u/1")];
        let two = vec![actor("https://a.example/u/1"), actor("https://b.example/u/2")];
        let kept = known.followers(1, async { Ok::<_, &str>(one.clone()) }).await.expect("read");
        assert_eq!(*kept, one);
        assert_eq!(*known.followers(1, never()).await.expect("kept"), one);

        known.followers_changed(1);
        assert_eq!(known.followers(1, never()).await, Err("read again"));

        // A read that began before a change and ended after it: answered,
        // not kept.
        let raced = known
            .followers(1, async {
                known.followers_changed(1);
                Ok::<_, &str>(one.clone())
            })
            .await
            .expect("read");
        assert_eq!(*raced, one);
        assert_eq!(known.followers(1, never()).await, Err("read again"));

        // An actor fetched again: every list forgotten.
        known.followers(1, async { Ok::<_, &str>(two.clone()) }).await.expect("read");
        known.followers(2, async { Ok::<_, &str>(one.clone()) }).await.expect("read");
        known.followers_changed(2);
        assert_eq!(*known.followers(1, never()).await.expect("kept"), two);
        known.actor_fetched("https://b.example/u/2");
        assert_eq!(known.followers(1, never()).await, Err("read again"));
    }

    fn signer(actor_id: &str, user: Option<i64>) -> KnownActor {
        let user = user.map(|id| crate::model::User {
            id,
            name: "a@a.example".into(),
            is_admin: false,
            created_at: crate::model::Timestamp(0),
        });
        KnownActor { actor: actor(actor_id), user }
    }

    #[tokio::test]
    async fn a_signer_with_a_user_is_kept_until_its_actor_is_fetched_or_its_user_deleted() {
        let known = Known::default();
        let alice = signer("https://a.example/u/alice", Some(5));
        let bob = signer("https://a.example/u/bob", Some(6));
        let read = |k: &KnownActor| {
            let k = k.clone();
            async move { Ok::<_, &str>(Some(k)) }
        };
        assert_eq!(known.signer("ka", read(&alice)).await, Ok(Some(alice.clone())));
        assert_eq!(known.signer("kb", read(&bob)).await, Ok(Some(bob.clone())));
        assert_eq!(known.signer("ka", never()).await, Ok(Some(alice.clone())));

        known.actor_fetched("https://a.example/u/alice");
        assert_eq!(known.signer("ka", never()).await, Err("read again"));
        assert_eq!(known.signer("kb", never()).await, Ok(Some(bob.clone())));
        known.user_deleted(6);
        assert_eq!(known.signer("kb", never()).await, Err("read again"));

        // Without a user (one is about to be made) or unknown: not kept.
        let newcomer = signer("https://a.example/u/new", None);
        assert_eq!(known.signer("kn", read(&newcomer)).await, Ok(Some(newcomer)));
        assert_eq!(known.signer("kn", never()).await, Err("read again"));
        assert_eq!(known.signer("kx", async { Ok::<_, &str>(None) }).await, Ok(None));
        assert_eq!(known.signer("kx", never()).await, Err("read again"));

        // Read across a change: answered, not kept.
        let raced = known
            .signer("ka", async {
                known.user_deleted(99);
                Ok::<_, &str>(Some(alice.clone()))
            })
            .await;
        assert_eq!(raced, Ok(Some(alice.clone())));
        assert_eq!(known.signer("ka", never()).await, Err("read again"));

        // Kept a minute at most.
        known.signer("ka", read(&alice)).await.expect("read");
        let past = Instant::now().checked_sub(SIGNER_TTL).expect("the clock started over a minute ago");
        known.signers.lock().expect("lock").get_mut("ka").expect("kept").1 = past;
        assert_eq!(known.signer("ka", never()).await, Err("read again"));

        known.signer("ka", read(&alice)).await.expect("read");
        known.followers(1, async { Ok::<_, &str>(Vec::new()) }).await.expect("read");
        known.clear();
        assert_eq!(known.signer("ka", never()).await, Err("read again"));
        assert_eq!(known.followers(1, never()).await, Err("read again"));
    }

    #[tokio::test]
    async fn a_full_map_is_emptied_not_grown() {
        let known = Known::default();
        for t in 0..MAX_ENTRIES as i64 + 10 {
            known.topic_community(t, async { Ok::<_, &str>(community(1, "rust")) }).await.expect("read");
        }
        assert!(known.topics.lock().expect("lock").len() <= MAX_ENTRIES);
    }

    #[tokio::test]
    async fn follower_lists_are_kept_within_their_budget_and_one_too_long_is_not_kept() {
        let known = Known::default();
        let list = |n: usize| (0..n).map(|i| actor(&format!("https://a.example/u/{i}"))).collect::<Vec<_>>();
        let half = MAX_FOLLOWERS / 2;
        known.followers(1, async { Ok::<_, &str>(list(half)) }).await.expect("read");
        known.followers(2, async { Ok::<_, &str>(list(half)) }).await.expect("read");
        assert_eq!(known.followers(1, never()).await.map(|l| l.len()), Ok(half));
        assert_eq!(known.followers.lock().expect("lock").held, 2 * half);
        // A third list does not fit beside them: they are forgotten.
        known.followers(3, async { Ok::<_, &str>(list(10)) }).await.expect("read");
        assert_eq!(known.followers(1, never()).await, Err("read again"));
        assert_eq!(known.followers(3, never()).await.map(|l| l.len()), Ok(10));
        assert_eq!(known.followers.lock().expect("lock").held, 10);
        // Forgetting one gives its room back.
        known.followers_changed(3);
        assert_eq!(known.followers.lock().expect("lock").held, 0);
        // One longer than the budget is answered, never kept.
        let long = known.followers(4, async { Ok::<_, &str>(list(MAX_FOLLOWERS + 1)) }).await.expect("read");
        assert_eq!(long.len(), MAX_FOLLOWERS + 1);
        assert_eq!(known.followers(4, never()).await, Err("read again"));
    }
}
