//! `Change`: what one committed write did, as the rest of the system needs
//! to hear it. Every operation of the application core that commits
//! returns one (or none, when nothing changed); `app::apply` is the one
//! place it takes effect: the cached renderings it makes stale are
//! evicted, its live event is framed once for every subscriber, and it
//! goes on the cluster bus, whose other nodes apply it the same way.

use serde::{Deserialize, Serialize};

use super::{Notified, Post, Topic};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "change", rename_all = "snake_case")]
pub enum Change {
    /// A new reply. `notify` is whose live inbox hears of it (the author
    /// of what it replies to, never the replier); `inbox`, the
    /// notifications it stored (that reply, and mentions), each user's
    /// with their unread count.
    PostCreated {
        post: Post,
        notify: Option<i64>,
        #[serde(default)]
        inbox: Vec<Notified>,
    },
    /// A post's body changed (an edit, or a moderator restored it while
    /// its topic is visible): subscribers get the post again. `by`: the
    /// moderator who restored it, which federation sends on as the `Undo`
    /// of their removal; `None` for an edit.
    PostEdited {
        post: Post,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<Acted>,
    },
    /// A post went from view (deleted by its author, removed by a
    /// moderator). `by`: who did which, which federation sends on as
    /// their `Delete` (absent from a node that did not say).
    PostRemoved {
        topic_id: i64,
        post_id: i64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<Acted>,
    },
    /// A new topic in its community.
    TopicCreated { topic: Topic },
    /// Anything else that changes how a topic reads (an edit, a deletion,
    /// a removal, a restore, a lock): its renderings are stale, and no
    /// live event says more than a reload would. `by`: who deleted,
    /// removed, locked or unlocked it, when that is what happened (as
    /// `PostRemoved::by`; federation sends their `Delete` or `Lock`).
    TopicChanged {
        topic_id: i64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<Acted>,
    },
    /// A vote's new total; `post_id` is `None` for the topic's own score.
    /// `by`: the vote that made it, which federation sends on as a
    /// `Like`, `Dislike` or `Undo` (absent from a node that did not say).
    Scored {
        topic_id: i64,
        post_id: Option<i64>,
        score: i64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<Voter>,
        /// The vote's number in the order its store committed votes
        /// (`VoteOutcome::seq`), when it knows one. Numbers of one process:
        /// never sent to other nodes.
        #[serde(skip)]
        seq: Option<u64>,
    },
    /// Users' inboxes changed apart from a reply: a new topic's mentions,
    /// a moderator's action notified its author, a private message
    /// reached its recipient, or a user marked notifications read (also by
    /// reading a conversation). Each
    /// user's live channel hears their new unread count.
    Inbox { notified: Vec<Notified> },
    /// Sessions or tokens of a user were revoked (a logout, a password
    /// change, "sign out everywhere else"): every node forgets the user's
    /// cached tokens, so none still answers for a revoked one.
    TokensRevoked { user_id: i64 },
    /// An account was deleted (by its owner or an administrator): every
    /// node forgets its cached tokens, and evicts the renderings of the
    /// topics it wrote or replied in, which showed its name (or its
    /// removed text).
    AccountDeleted { user_id: i64, topics: Vec<i64> },
    /// A local community's remote followers changed (a `Follow` or its
    /// `Undo`): every node forgets the list it keeps
    /// (`app::federation::known`).
    Followers { community_id: i64 },
    /// A remote actor known before was fetched again: its key or inbox
    /// may have changed, so every node forgets what it keeps of it.
    ActorFetched { actor_id: String },
}

/// Who took a topic or post from view, or locked it, and how: what
/// federation needs to send it on as that user's activity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Acted {
    pub user_id: i64,
    pub name: String,
    pub how: How,
    /// A moderator's reason, when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum How {
    /// By its author (or an administrator).
    Deleted,
    /// By a moderator.
    Removed,
    Locked,
    Unlocked,
    /// By a moderator, undoing a removal.
    Restored,
}

impl Acted {
    pub fn by(user: &super::User, how: How, reason: Option<String>) -> Acted {
        Acted { user_id: user.id, name: user.name.clone(), how, reason }
    }
}

/// Who cast a vote, and what: 1, -1, or 0 (withdrawn).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Voter {
    pub user_id: i64,
    pub name: String,
    pub value: i8,
}

impl Change {
    /// The topic whose cached renderings this change makes stale, if any
    /// (a new topic has none yet).
    pub fn stale_topic(&self) -> Option<i64> {
        match self {
            Change::PostCreated { post, .. } | Change::PostEdited { post, .. } => Some(post.topic_id),
            Change::PostRemoved { topic_id, .. }
            | Change::TopicChanged { topic_id, .. }
            | Change::Scored { topic_id, .. } => Some(*topic_id),
            // An account's deletion makes many topics stale: `stale_topics`.
            Change::TopicCreated { .. }
            | Change::TokensRevoked { .. }
            | Change::Inbox { .. }
            | Change::AccountDeleted { .. }
            | Change::Followers { .. }
            | Change::ActorFetched { .. } => None,
        }
    }

    /// For a vote on a topic's own score (not on one of its posts, whose
    /// scores may reorder them) numbered by its store: the topic, the
    /// vote's number and the new score, which its cached renderings can
    /// take in place (`app::read::rescore`).
    pub fn topic_score(&self) -> Option<(i64, u64, i64)> {
        match self {
            Change::Scored { topic_id, post_id: None, score, seq: Some(seq), .. } => Some((*topic_id, *seq, *score)),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Timestamp;

    fn post() -> Post {
        Post {
            id: 9,
            topic_id: 3,
            parent_id: Some(2),
            author: Some("ann".into()),
            body: "*hi*".into(),
            body_html: "<p><em>hi</em></p>\n".into(),
            created_at: Timestamp(1_764_000_000),
            edited_at: Some(Timestamp(1_764_000_060)),
            deleted: false,
            removed: false,
            score: 4,
            author_id: 0,
            notify: None,
            inbox: Vec::new(),
        }
    }

    fn notified() -> Notified {
        Notified {
            user_id: 5,
            kind: Some(crate::model::NoticeKind::Mention),
            topic_id: Some(3),
            post_id: Some(9),
            unread: 2,
        }
    }

    fn moderator(how: How, reason: Option<String>) -> Acted {
        Acted { user_id: 7, name: "mod".into(), how, reason }
    }

    #[test]
    fn every_change_survives_json_for_the_cluster_bus() {
        let changes = [
            Change::PostCreated { post: post(), notify: Some(5), inbox: vec![notified()] },
            Change::Inbox { notified: vec![notified(), Notified { kind: None, ..notified() }] },
            Change::PostEdited { post: post(), by: None },
            Change::PostEdited { post: post(), by: Some(moderator(How::Restored, None)) },
            Change::TopicChanged { topic_id: 3, by: Some(moderator(How::Removed, Some("spam".into()))) },
            Change::PostRemoved { topic_id: 3, post_id: 9, by: None },
            Change::TopicChanged { topic_id: 3, by: None },
            Change::Scored { topic_id: 3, post_id: None, score: -2, by: None, seq: None },
            Change::Scored {
                topic_id: 3,
                post_id: Some(9),
                score: 1,
                by: Some(Voter { user_id: 5, name: "ann".into(), value: -1 }),
                seq: None,
            },
            Change::TokensRevoked { user_id: 5 },
            Change::AccountDeleted { user_id: 5, topics: vec![3, 8] },
            Change::Followers { community_id: 4 },
            Change::ActorFetched { actor_id: "https://a.example/u/ann".into() },
        ];
        for change in changes {
            let text = serde_json::to_string(&change).expect("serialises");
            let back: Change = serde_json::from_str(&text).expect("parses");
            assert_eq!(back, change, "{text}");
        }
    }

    #[test]
    fn a_new_topic_makes_no_rendering_stale_and_a_reply_makes_its_topics_stale() {
        assert_eq!(Change::PostCreated { post: post(), notify: None, inbox: Vec::new() }.stale_topic(), Some(3));
        assert_eq!(
            Change::Scored { topic_id: 8, post_id: Some(1), score: 1, by: None, seq: None }.stale_topic(),
            Some(8)
        );
    }

    #[test]
    fn a_votes_number_takes_effect_on_its_own_node_only() {
        let numbered = Change::Scored { topic_id: 3, post_id: None, score: 4, by: None, seq: Some(17) };
        assert_eq!(numbered.topic_score(), Some((3, 17, 4)));
        let text = serde_json::to_string(&numbered).expect("serialises");
        let back: Change = serde_json::from_str(&text).expect("parses");
        assert_eq!(back.topic_score(), None, "another node's numbers are not ours: {text}");
        assert_eq!(back.stale_topic(), Some(3), "there it evicts");
        let on_a_post = Change::Scored { topic_id: 3, post_id: Some(9), score: 4, by: None, seq: Some(18) };
        assert_eq!(on_a_post.topic_score(), None, "a post's score may reorder the list");
    }
}
