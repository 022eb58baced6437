//! What the server sends: every event and reply is one JSON object with a
//! `type`, serialised straight into a WebSocket text frame. An event is
//! built once, when someone listens, and shared by all its subscribers;
//! SSE reuses the same bytes between a `data: ` prefix and a blank line.

use bytes::Bytes;
use serde::Serialize;

use super::frame::{self, MAX_HEADER, OP_TEXT};
use super::hub::{Hub, Key};
use crate::model::{NoticeKind, Notified, Post, Topic};

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Out<'a> {
    /// A new post in a subscribed topic. Posts go out whole, `body_html`
    /// (stored when written) included, so a page shows one without asking.
    Post {
        post: &'a Post,
    },
    /// A new reply to one of the authenticated user's posts or topics.
    Reply {
        post: &'a Post,
    },
    PostEdited {
        post: &'a Post,
    },
    PostRemoved {
        topic_id: i64,
        post_id: i64,
    },
    /// A new topic in a subscribed community.
    Topic {
        topic: &'a Topic,
    },
    /// A vote total; `post_id` is null for the topic's own score.
    Score {
        topic_id: i64,
        post_id: Option<i64>,
        score: i64,
    },
    /// The user's inbox changed: a notification was stored (`kind` and
    /// where), or some were marked read (`kind` null); `unread` is their
    /// count of unread notifications now.
    Inbox {
        kind: Option<NoticeKind>,
        topic_id: Option<i64>,
        post_id: Option<i64>,
        unread: i64,
    },
    /// The connection's subscriptions after a change (and at connect).
    Subscribed {
        topics: Vec<i64>,
        communities: Vec<&'a str>,
        inbox: bool,
    },
    /// The answer to `{"op":"ping"}`, for clients that cannot send pings.
    Pong,
    /// A client message was refused; the connection stays open.
    Error {
        error: ErrorBody<'a>,
    },
}

#[derive(Serialize)]
pub struct ErrorBody<'a> {
    pub code: &'a str,
    pub message: &'a str,
}

/// Serialises `value` into an unmasked text frame with a single
/// allocation: the JSON is written after room for the longest header, and
/// the header is put right in front of it.
pub fn text_frame(value: &impl Serialize) -> Option<Bytes> {
    const ROOM: usize = MAX_HEADER - 4;
    let mut buf = Vec::with_capacity(512);
    buf.resize(ROOM, 0);
    serde_json::to_writer(&mut buf, value).ok()?;
    let mut head = [0u8; MAX_HEADER];
    let n = frame::write_header(&mut head, OP_TEXT, buf.len() - ROOM, None);
    buf[ROOM - n..ROOM].copy_from_slice(&head[..n]);
    Some(Bytes::from(buf).slice(ROOM - n..))
}

/// The JSON inside a server text frame.
pub fn payload(frame: &Bytes) -> Bytes {
    frame.slice(frame::payload_offset(frame).min(frame.len())..)
}

pub fn error_frame(code: &str, message: &str) -> Option<Bytes> {
    text_frame(&Out::Error { error: ErrorBody { code, message } })
}

impl Hub {
    /// A new post, to its topic's subscribers and to `notify`'s inbox.
    pub fn post_created(&self, post: &Post, notify: Option<i64>) {
        self.publish_with(&Key::Topic(post.topic_id), || text_frame(&Out::Post { post }));
        if let Some(user) = notify {
            self.publish_with(&Key::Inbox(user), || text_frame(&Out::Reply { post }));
        }
    }

    /// A stored notification (or a read marking), to its user's inbox.
    pub fn notified(&self, n: &Notified) {
        let Notified { kind, topic_id, post_id, unread, .. } = *n;
        self.publish_with(&Key::Inbox(n.user_id), || text_frame(&Out::Inbox { kind, topic_id, post_id, unread }));
    }

    pub fn post_edited(&self, post: &Post) {
        self.publish_with(&Key::Topic(post.topic_id), || text_frame(&Out::PostEdited { post }));
    }

    pub fn post_removed(&self, topic_id: i64, post_id: i64) {
        self.publish_with(&Key::Topic(topic_id), || text_frame(&Out::PostRemoved { topic_id, post_id }));
    }

    pub fn topic_created(&self, topic: &Topic) {
        self.publish_with(&Key::Community(topic.community.as_str().into()), || text_frame(&Out::Topic { topic }));
    }
}

pub fn publish_score(hub: &Hub, is_post: bool, id: i64, topic_id: i64, score: i64) {
    let post_id = is_post.then_some(id);
    hub.publish_with(&Key::Topic(topic_id), || text_frame(&Out::Score { topic_id, post_id, score }));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_frame_is_a_text_frame_around_the_json() {
        for n in [1usize, 200, 70_000] {
            let msg = "x".repeat(n);
            let f = error_frame("c", &msg).expect("frame");
            let head = frame::parse_head(&f, usize::MAX).expect("valid").expect("complete");
            assert_eq!((head.opcode, head.mask, head.frame_len()), (OP_TEXT, None, f.len()));
            let json: serde_json::Value = serde_json::from_slice(&payload(&f)).expect("json");
            assert_eq!(json["type"], "error");
            assert_eq!(json["error"]["message"].as_str().map(str::len), Some(n));
        }
    }

    #[test]
    fn a_post_event_carries_the_source_and_its_stored_html() {
        let post = Post {
            id: 9,
            topic_id: 3,
            parent_id: None,
            author: Some("ann".into()),
            body: "*hi*".into(),
            body_html: "<p><em>hi</em></p>\n".into(),
            created_at: crate::model::Timestamp(0),
            edited_at: None,
            deleted: false,
            removed: false,
            score: 0,
            author_id: 1,
            notify: None,
            inbox: Vec::new(),
        };
        for out in [Out::Post { post: &post }, Out::PostEdited { post: &post }] {
            let f = text_frame(&out).expect("frame");
            let json: serde_json::Value = serde_json::from_slice(&payload(&f)).expect("json");
            assert_eq!(
                (json["post"]["body"].as_str(), json["post"]["body_html"].as_str()),
                (Some("*hi*"), Some("<p><em>hi</em></p>\n"))
            );
        }
    }
}
