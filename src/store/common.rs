//! What both storage backends decide the same way, apart from their SQL:
//! the refusal a banned user gets, the `Post` a new reply becomes, and how
//! a listing fetched one row past its limit is cut into a page.

use crate::model::{Post, Timestamp, Topic, User};
use crate::store::{Cursor, NewPost, StoreError, TopicPage, TopicSort};

/// The refusal for a ban in force: in `community` (`None`: site-wide),
/// until `expires_at` (`None`: permanent), with the moderator's reason.
pub fn banned(community: Option<String>, expires_at: Option<i64>, reason: &str) -> StoreError {
    let scope = community.map_or_else(|| "this site".to_owned(), |c| format!("community {c}"));
    let until = expires_at.map_or_else(|| "permanently".to_owned(), |t| format!("until {}", Timestamp(t).rfc3339()));
    let reason = if reason.is_empty() { String::new() } else { format!(" (reason: {reason})") };
    StoreError::Denied("banned", format!("you are banned from {scope} {until}{reason}"))
}

/// The reply just stored as `id`; `replied_to` (the parent's or the
/// topic's author) is notified unless it is the author themself.
pub fn new_reply(id: i64, author: &User, new: &NewPost, html: &str, now: Timestamp, replied_to: Option<i64>) -> Post {
    Post {
        id,
        topic_id: new.topic_id,
        parent_id: new.parent_id,
        author: Some(author.name.clone()),
        body: new.body.as_str().to_owned(),
        body_html: html.to_owned(),
        created_at: now,
        edited_at: None,
        deleted: false,
        removed: false,
        score: 0,
        author_id: author.id,
        notify: replied_to.filter(|&u| u != author.id),
    }
}

/// A listing read with `limit + 1` rows (each with its hot rank): the first
/// `limit`, and the cursor after the last of them when more follow.
pub fn topic_page(mut rows: Vec<(Topic, f64)>, limit: usize, sort: TopicSort) -> TopicPage {
    let next = if rows.len() > limit {
        rows.truncate(limit);
        rows.last().map(|(t, hot)| match sort {
            TopicSort::Hot => Cursor::Hot(*hot, t.id),
            TopicSort::New => Cursor::New(t.created_at.0, t.id),
            TopicSort::Top(_) => Cursor::Top(t.score, t.id),
        })
    } else {
        None
    };
    TopicPage { topics: rows.into_iter().map(|(t, _)| t).collect(), next }
}
