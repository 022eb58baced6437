//! An account's export: one JSON document of everything the user made and
//! set, written as a stream of chunks. Each chunk is one bounded page read
//! from the store (`PAGE` items), so an account of any size costs the
//! server one page of memory at a time, never the whole document.
//!
//! The pages are separate reads, not one snapshot: a write landing
//! mid-export may or may not be in it.

use bytes::Bytes;
use futures_core::Stream;
use serde::Serialize;

use super::auth::AuthUser;
use super::{AppError, AppResult, AppState};
use crate::model::{SavedCursor, Timestamp, User};
use crate::store::{ListInbox, Store};

/// Items per page read, and so per chunk written.
pub const PAGE: usize = 200;

/// What the document says it is, for whoever reads it back.
pub const FORMAT: &str = "pith-export/1";

/// Where the export has got to: each array, from just after its cursor.
enum Part {
    Head,
    Topics(Option<i64>),
    Posts(Option<i64>),
    Votes(Option<(i64, i64)>),
    Saved(Option<SavedCursor>),
    Inbox(Option<i64>),
    Messages(Box<Conversations>),
    Done,
}

/// The walk through the user's private messages: conversation by
/// conversation, each in pages (newest first, as the store reads them).
#[derive(Default)]
struct Conversations {
    /// The other users of the conversations read so far and not yet
    /// written; the first is being written.
    names: std::collections::VecDeque<String>,
    /// Older messages of the first conversation start after this id.
    after: Option<i64>,
    /// The next page of conversations; `None` once the last was read.
    next_page: Option<i64>,
    /// No page of conversations read yet.
    started: bool,
    /// No message written yet: the next one needs no comma.
    first: bool,
}

/// The account's own settings, as the export lists them.
#[derive(Serialize)]
struct Settings {
    two_factor: bool,
    recovery_codes_left: i64,
}

/// The streamed export as a download, for the API and the pages alike.
pub fn download<S: Store>(state: AppState<S>, auth: AuthUser) -> axum::response::Response {
    use axum::http::header::{self, HeaderValue};
    let name = format!("attachment; filename=\"pith-export-{}.json\"", auth.user.name);
    let mut res = axum::response::Response::new(axum::body::Body::from_stream(stream(state, auth)));
    let headers = res.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if let Ok(value) = HeaderValue::from_str(&name) {
        headers.insert(header::CONTENT_DISPOSITION, value);
    }
    res
}

/// The export of `auth`'s account as a stream of JSON chunks. A failed
/// read ends the stream with the error (the client sees a cut-off body).
pub fn stream<S: Store>(state: AppState<S>, auth: AuthUser) -> impl Stream<Item = AppResult<Bytes>> + Send {
    futures_util::stream::unfold(Some((state, auth, Part::Head)), |step| async move {
        let (state, auth, part) = step?;
        match next(&state, &auth, part).await {
            Ok((chunk, Part::Done)) => Some((Ok(chunk), None)),
            Ok((chunk, part)) => Some((Ok(chunk), Some((state, auth, part)))),
            Err(e) => {
                e.report();
                Some((Err(e), None))
            }
        }
    })
}

/// One chunk, and where the next starts.
async fn next<S: Store>(state: &AppState<S>, auth: &AuthUser, part: Part) -> AppResult<(Bytes, Part)> {
    let user = &auth.user;
    let mut out = Vec::new();
    let next = match part {
        Part::Head => {
            head(state, auth, &mut out).await?;
            out.extend_from_slice(br#","topics":["#);
            Part::Topics(None)
        }
        Part::Topics(after) => {
            let page = state.store.authored_topics(user.id, after, PAGE).await?;
            let last = page.last().map(|t| t.id);
            items(&mut out, after.is_none(), &page)?;
            more(&mut out, &page, last, Part::Topics, Part::Posts(None), "posts")
        }
        Part::Posts(after) => {
            let page = state.store.authored_posts(user.id, after, PAGE).await?;
            let last = page.last().map(|p| p.id);
            items(&mut out, after.is_none(), &page)?;
            more(&mut out, &page, last, Part::Posts, Part::Votes(None), "votes")
        }
        Part::Votes(after) => {
            let page = state.store.cast_votes(user.id, after, PAGE).await?;
            let last = page.last().map(|v| v.key());
            items(&mut out, after.is_none(), &page)?;
            more(&mut out, &page, last, Part::Votes, Part::Saved(None), "saved")
        }
        Part::Saved(after) => {
            let page = state.store.saved(user.id, after, PAGE).await?;
            let first = after.is_none();
            let saved: Vec<_> = page.items.into_iter().map(crate::model::Saved::redact).collect();
            items(&mut out, first, &saved)?;
            match page.next {
                Some(cursor) => Part::Saved(Some(cursor)),
                None => close(&mut out, Part::Inbox(None), "inbox"),
            }
        }
        Part::Inbox(after) => {
            let q = ListInbox { unread_only: false, after, limit: PAGE };
            let page = state.store.inbox(user.id, q).await?;
            items(&mut out, after.is_none(), &page.items)?;
            match page.next {
                Some(id) => Part::Inbox(Some(id)),
                None => close(
                    &mut out,
                    Part::Messages(Box::new(Conversations { first: true, ..Default::default() })),
                    "messages",
                ),
            }
        }
        Part::Messages(walk) => messages(state, user, *walk, &mut out).await?,
        Part::Done => Part::Done,
    };
    Ok((Bytes::from(out), next))
}

/// One page of messages (reading the next page of conversations first
/// when the last one's are all written); the array and the document close
/// after the last.
async fn messages<S: Store>(
    state: &AppState<S>,
    user: &User,
    mut walk: Conversations,
    out: &mut Vec<u8>,
) -> AppResult<Part> {
    use crate::store::IdPage;
    while walk.names.is_empty() {
        if walk.started && walk.next_page.is_none() {
            out.extend_from_slice(b"]}\n");
            return Ok(Part::Done);
        }
        let page = state.store.conversations(user.id, IdPage { after: walk.next_page, limit: PAGE }).await?;
        walk.started = true;
        walk.next_page = page.next;
        walk.names = page.conversations.into_iter().map(|c| c.with).collect();
    }
    let with = walk.names.front().cloned().unwrap_or_default();
    let page = state.store.conversation(user.id, with, IdPage { after: walk.after, limit: PAGE }).await?;
    items(out, walk.first, &page.messages)?;
    walk.first &= page.messages.is_empty();
    walk.after = page.next;
    if page.next.is_none() {
        walk.names.pop_front();
    }
    Ok(Part::Messages(Box::new(walk)))
}

/// The document's opening: what it is, the profile, settings, sessions
/// and blocked communities and users (each small), up to the first array.
async fn head<S: Store>(state: &AppState<S>, auth: &AuthUser, out: &mut Vec<u8>) -> AppResult<()> {
    #[derive(Serialize)]
    struct Head<'a> {
        format: &'static str,
        exported_at: Timestamp,
        profile: &'a User,
        settings: Settings,
        sessions: Vec<super::sessions::SessionInfo>,
        community_blocks: Vec<String>,
        user_blocks: Vec<String>,
    }
    let two_factor = state.store.two_factor(auth.user.id).await?;
    let head = Head {
        format: FORMAT,
        exported_at: Timestamp::now(),
        profile: &auth.user,
        settings: Settings { two_factor: two_factor.secret.is_some(), recovery_codes_left: two_factor.recovery_left },
        sessions: super::sessions::list(state, auth).await?,
        community_blocks: state.store.blocked(auth.user.id).await?,
        user_blocks: state.store.blocks(auth.user.id).await?.users,
    };
    serde_json::to_writer(&mut *out, &head).map_err(internal)?;
    // Reopen the object to append the arrays.
    out.pop();
    Ok(())
}

/// Writes `page`'s items, with the comma that joins them to the previous
/// page's unless this is the array's first.
fn items<T: Serialize>(out: &mut Vec<u8>, first: bool, page: &[T]) -> AppResult<()> {
    for (i, item) in page.iter().enumerate() {
        if i > 0 || !first {
            out.push(b',');
        }
        serde_json::to_writer(&mut *out, item).map_err(internal)?;
    }
    Ok(())
}

/// After a page read by id: a full page means more may follow from its
/// last item; a short one closes the array and opens `name`'s.
fn more<T, K>(
    out: &mut Vec<u8>,
    page: &[T],
    last: Option<K>,
    again: fn(Option<K>) -> Part,
    then: Part,
    name: &str,
) -> Part {
    match last {
        Some(key) if page.len() == PAGE => again(Some(key)),
        _ => close(out, then, name),
    }
}

fn close(out: &mut Vec<u8>, then: Part, name: &str) -> Part {
    out.extend_from_slice(format!(r#"],"{name}":["#).as_bytes());
    then
}

fn internal(e: serde_json::Error) -> AppError {
    AppError::Internal(format!("export: {e}"))
}
