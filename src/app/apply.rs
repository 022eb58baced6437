//! `apply`: the one place a committed write takes effect. Every operation
//! that commits hands its `Change` here, whichever door it came in by (the
//! JSON API, a page's form); so does the cluster bus for other nodes'
//! writes. A local write is also sent to the Fediverse from here
//! (`federation::outbound`), when federation is on. The cache and the hub know nothing of the bus.

use super::AppState;
use crate::model::Change;
use crate::store::Store;

/// Applies a write committed on this node here, then sends it to the
/// other nodes (when there are any).
pub fn apply<S: Store>(state: &AppState<S>, change: Change) {
    apply_here(state, &change);
    // Only the node that committed a write federates it.
    super::federation::outbound::send(state, &change);
    if let Some(bus) = state.bus.get() {
        bus.change(change);
    }
}

/// Applies a change on this node only: exact cache invalidation and the
/// live event, framed once for every subscriber. A change from another
/// node comes in here and goes no further, so nothing echoes.
pub fn apply_here<S: Store>(state: &AppState<S>, change: &Change) {
    if let Some((topic, seq, score)) = change.topic_score() {
        super::read::rescore(state, topic, seq, score);
    } else if let Change::PostCreated { post, .. } = change {
        super::read::add_post(state, post);
    } else if let Some(topic) = change.stale_topic() {
        super::read::evict(state, topic);
    }
    let hub = &state.live;
    match change {
        Change::PostCreated { post, notify, inbox } => {
            hub.post_created(post, *notify);
            inbox.iter().for_each(|n| hub.notified(n));
        }
        Change::Inbox { notified } => notified.iter().for_each(|n| hub.notified(n)),
        Change::PostEdited { post, .. } => hub.post_edited(post),
        Change::PostRemoved { topic_id, post_id, .. } => hub.post_removed(*topic_id, *post_id),
        Change::TopicCreated { topic } => hub.topic_created(topic),
        Change::TopicChanged { .. } => {}
        Change::TokensRevoked { user_id } => state.tokens.forget_user(*user_id),
        Change::AccountDeleted { user_id, topics } => {
            state.tokens.forget_user(*user_id);
            if let Some(fed) = state.federation.get() {
                fed.known.user_deleted(*user_id);
            }
            topics.iter().for_each(|&topic| super::read::evict(state, topic));
        }
        Change::Followers { community_id } => {
            if let Some(fed) = state.federation.get() {
                fed.known.followers_changed(*community_id);
            }
        }
        Change::ActorFetched { actor_id } => {
            if let Some(fed) = state.federation.get() {
                fed.known.actor_fetched(actor_id);
            }
        }
        Change::Scored { topic_id, post_id, score, .. } => {
            hub.score(post_id.is_some(), post_id.unwrap_or(*topic_id), *topic_id, *score)
        }
    }
}
