//! Reading a topic as the API answers it: rendered once into the cache,
//! served from there to every reader, rendered again in the background
//! after a write (`evict`, called by `apply`), and rendered privately for
//! the few who may see removed content. A huge topic is answered in pages
//! (`PageLimit::API`), each cached as its own rendering.

use std::sync::Arc;

use axum::http::header;
use serde::Serialize;

use super::{AppError, AppResult, AppState, AuthUser};
use crate::cache::{Key, Rendered, Variant};
use crate::model::paging::PageLimit;
use crate::model::policy::{self, BanFacts, ItemFacts, Kind, TopicFacts};
use crate::model::{Post, Restricted, Timestamp, Topic, User, Viewer, redact};
use crate::store::{PostCursor, PostPage, PostSort, Store};

/// `?html=`: whether a topic's post list carries `body_html` too.
pub fn parse_html(s: Option<&str>) -> AppResult<bool> {
    match s {
        None | Some("false") => Ok(false),
        Some("true") => Ok(true),
        Some(_) => Err(AppError::BadRequest("invalid_query", "html must be true or false".into())),
    }
}

pub fn parse_post_sort(s: Option<&str>) -> AppResult<PostSort> {
    match s {
        None | Some("best") => Ok(PostSort::Best),
        Some("new") => Ok(PostSort::New),
        Some("old") => Ok(PostSort::Old),
        Some(_) => Err(AppError::BadRequest("invalid_query", "sort must be one of best, new, old".into())),
    }
}

/// `?after=`: where a page of a huge topic starts (the previous page's
/// `next`), in `sort` order; empty or absent is the first page.
pub fn parse_post_cursor(s: Option<&str>, sort: PostSort) -> AppResult<Option<PostCursor>> {
    let bad = |m: &str| AppError::BadRequest("invalid_query", m.to_owned());
    match s {
        None | Some("") => Ok(None),
        Some(s) => match PostCursor::decode(s) {
            Some(c) if c.sort() == sort => Ok(Some(c)),
            Some(_) => Err(bad("after is a cursor of another sort order")),
            None => Err(bad("after is not a valid cursor")),
        },
    }
}

#[derive(Serialize)]
struct TopicResponse<'a> {
    topic: &'a Topic,
    posts: Vec<ListedPost<'a>>,
    /// Only past the cut-off (`PageLimit::API`): the `after` of the next
    /// page. Absent otherwise, so a topic of ordinary size answers the
    /// same bytes as before pages existed.
    #[serde(skip_serializing_if = "Option::is_none")]
    next: Option<String>,
}

/// A post as a topic's post list carries it: `Post` without what the list
/// already says or what is at its default. The topic's id is the topic's;
/// `parent_id` is there for replies only, `edited_at` once edited, `deleted`
/// and `removed` when true; `body_html` only when asked for (`?html=true`).
/// The post list is what every read sends and what the cache holds, and a
/// realistic post's field names and default values were about half the
/// size of its text; the pages render from the stored HTML without this
/// JSON. `tests/it/api.rs` checks the shape.
#[derive(Serialize)]
struct ListedPost<'a> {
    id: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    parent_id: Option<i64>,
    author: Option<&'a str>,
    body: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    body_html: Option<&'a str>,
    created_at: Timestamp,
    #[serde(skip_serializing_if = "Option::is_none")]
    edited_at: Option<Timestamp>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    deleted: bool,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    removed: bool,
    score: i64,
}

impl<'a> ListedPost<'a> {
    fn of(p: &'a Post, html: bool) -> ListedPost<'a> {
        ListedPost {
            id: p.id,
            parent_id: p.parent_id,
            author: p.author.as_deref(),
            body: &p.body,
            body_html: html.then_some(p.body_html.as_str()),
            created_at: p.created_at,
            edited_at: p.edited_at,
            deleted: p.deleted,
            removed: p.removed,
            score: p.score,
        }
    }
}

/// Evicts every rendering of `topic` after a write to it committed, and
/// renders again, in the background, the API renderings that were cached
/// and read since they were rendered: a topic people read is read again
/// soon, and that reader would otherwise wait for the render (the 1 % of
/// reads behind the open-loop p99, docs/BENCHMARKS.md "Open-loop
/// latency"). A rendering nobody read since the last write (the topic is
/// written faster than it is read) is not made again for nobody: its next
/// reader renders it. The pages and post fragments render on their next
/// request.
pub fn evict<S: Store>(state: &AppState<S>, topic: i64) {
    let read = state.cache.invalidate(topic);
    render_ahead(state, topic, read);
}

/// Renders again, in the background, the API renderings among `read`
/// (what `invalidate` evicted that readers had got).
fn render_ahead<S: Store>(state: &AppState<S>, topic: i64, read: Vec<Variant>) {
    let api: Vec<(PostSort, bool)> = read.into_iter().filter_map(Variant::json_params).collect();
    if api.is_empty() {
        return;
    }
    let state = state.clone();
    tokio::spawn(async move {
        for (sort, html) in api {
            let key = (topic, Variant::json(sort, html));
            // A failure (the topic deleted meanwhile, say) is the next
            // reader's to see, through the ordinary miss.
            let _ = state.cache.render_ahead(key, || render(&state, topic, sort, html, None, Viewer::Public)).await;
        }
    });
}

/// After vote number `seq` on `topic` (its own score, now `score`)
/// committed: its cached API renderings take the new score in place
/// (`TopicCache::rescore`), which costs a copy of their bytes where
/// evicting them cost a render from the database at every vote
/// (docs/PERFORMANCE.md, "Inbound federation"); its pages are evicted.
/// When it cannot, the topic is evicted as after any write.
pub fn rescore<S: Store>(state: &AppState<S>, topic: i64, seq: u64, score: i64) {
    let patch = |variant: Variant, old: &Rendered| match variant {
        Variant::Json(_) | Variant::JsonHtml(_) | Variant::JsonAfter(..) => {
            with_topic_score(&old.body, score).map(|body| old.with_body(body))
        }
        Variant::Page(_) | Variant::Post(_) | Variant::PageAfter(_) | Variant::Thread(..) => None,
    };
    if let Some(read) = state.cache.rescore(topic, seq, patch) {
        render_ahead(state, topic, read);
    }
}

/// `body` (a `TopicResponse`) with the topic's `score` set to `score`;
/// `None` if it is not one (the empty public view of a removed topic).
/// The topic comes first and has no nested objects, so the first
/// `,"score":` is its own: inside a JSON string a quote is always
/// escaped, so those bytes cannot be part of a title or a body.
fn with_topic_score(body: &[u8], score: i64) -> Option<Vec<u8>> {
    const TOPIC: &[u8] = b"{\"topic\":{";
    const KEY: &[u8] = b",\"score\":";
    if !body.starts_with(TOPIC) {
        return None;
    }
    let at = body.windows(KEY.len()).position(|w| w == KEY)? + KEY.len();
    let digits =
        body[at..].iter().enumerate().take_while(|&(i, &b)| b.is_ascii_digit() || (i == 0 && b == b'-')).count();
    if digits == 0 {
        return None;
    }
    let mut out = Vec::with_capacity(body.len() + 20);
    out.extend_from_slice(&body[..at]);
    out.extend_from_slice(itoa::Buffer::new().format(score).as_bytes());
    out.extend_from_slice(&body[at + digits..]);
    Some(out)
}

/// The public API rendering of a topic (of its page from `after`), from
/// the cache or rendered once for every reader that misses it at the same
/// time.
pub async fn cached_public<S: Store>(
    state: &AppState<S>,
    id: i64,
    sort: PostSort,
    html: bool,
    after: Option<PostCursor>,
) -> AppResult<Arc<Rendered>> {
    state
        .cache
        .get_or_render(public_key(id, sort, html, after), || render(state, id, sort, html, after, Viewer::Public))
        .await
}

/// The cache key of the public API rendering `cached_public` returns.
pub fn public_key(id: i64, sort: PostSort, html: bool, after: Option<PostCursor>) -> Key {
    match after {
        None => (id, Variant::json(sort, html)),
        Some(c) => (id, Variant::JsonAfter(c, html)),
    }
}

/// Reads and renders the topic (its page from `after`) as `viewer` may see
/// it. The public view of a removed topic is an empty body carrying its
/// restriction: cached like any other, so even its 404s are answered
/// without a query.
pub async fn render<S: Store>(
    state: &AppState<S>,
    id: i64,
    sort: PostSort,
    html: bool,
    after: Option<PostCursor>,
    viewer: Viewer,
) -> AppResult<Arc<Rendered>> {
    let PostPage { mut topic, mut posts, next } = state.store.topic_page(id, sort, after, PageLimit::API).await?;
    // Serialising a big topic takes milliseconds: keep it off
    // the async workers.
    let rendered = tokio::task::spawn_blocking(move || {
        let restricted = Restricted::of(&topic, &posts);
        let visible = redact(&mut topic, &mut posts, viewer);
        let body = if visible {
            let posts = posts.iter().map(|p| ListedPost::of(p, html)).collect();
            // The cache copies these bytes into an allocation of their
            // size class, without the growth slack of this Vec.
            let next = next.map(|c| c.encode());
            serde_json::to_vec(&TopicResponse { topic: &topic, posts, next })
                .map_err(|e| AppError::Internal(e.to_string()))?
        } else if viewer == Viewer::Public {
            Vec::new()
        } else {
            return Err(AppError::not_found("topic"));
        };
        Ok(Arc::new(Rendered::restricted(body, restricted)))
    })
    .await
    .map_err(|e| AppError::Internal(e.to_string()))??;
    Ok(rendered)
}

/// The Markdown an edit form starts from: the topic's body, or that of
/// its post `post`, when `user` may edit it as the API's edit decides
/// (`policy::may_edit`: the author or an admin, nothing deleted, nothing a
/// moderator removed). Bans are left to the edit itself, which says why.
/// Anyone else gets the edit's refusal (403, or 404 for what is deleted or
/// not there), never the source of someone else's or of removed text.
pub async fn edit_source<S: Store>(
    state: &AppState<S>,
    user: &User,
    topic: i64,
    post: Option<i64>,
) -> AppResult<String> {
    // One post, or the topic alone: never the whole topic for one form.
    let (t, post) = match post {
        Some(id) => state.store.topic_post(topic, id, 0).await.map(|(t, p, _)| (t, Some(p)))?,
        None => (state.store.topic(topic).await?, None),
    };
    let facts = TopicFacts {
        deleted: t.deleted,
        removed: t.removed,
        locked: t.locked,
        author_id: t.author_id,
        community_id: t.community_id,
    };
    let (item, body) = match post {
        None => (ItemFacts::of_topic(facts), t.body.unwrap_or_default()),
        Some(p) => {
            let item = ItemFacts {
                kind: Kind::Post,
                author_id: p.author_id,
                deleted: p.deleted,
                removed: p.removed,
                topic: facts,
            };
            (item, p.body)
        }
    };
    policy::may_edit(user, &item, &BanFacts::default(), Timestamp::now())?;
    Ok(body)
}

/// The viewer behind the request's token when they may see more of this
/// topic than the public: a site admin or moderator of its community sees
/// everything, the author of removed content their own. A missing or bad
/// token, or a failed lookup, leaves the request public (it fails closed).
pub async fn privileged_viewer<S: Store>(
    state: &AppState<S>,
    parts: &mut axum::http::request::Parts,
    restricted: &Restricted,
) -> Option<Viewer> {
    use axum::extract::FromRequestParts;
    if !parts.headers.contains_key(header::AUTHORIZATION) {
        return None;
    }
    let user = AuthUser::from_request_parts(parts, state).await.ok()?.user;
    if user.is_admin {
        return Some(Viewer::Moderator);
    }
    match state.store.is_moderator(user.id, restricted.community_id).await {
        Ok(true) => Some(Viewer::Moderator),
        _ if restricted.concerns(user.id) => Some(Viewer::Author(user.id)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_vote_changes_the_topics_score_and_nothing_else() {
        let body = br#"{"topic":{"id":1,"title":"a,\"score\":7","body":"x","locked":false,"score":-3,"post_count":2},"posts":[{"id":2,"score":5}]}"#;
        let new = with_topic_score(body, 12).expect("a topic rendering");
        let want = br#"{"topic":{"id":1,"title":"a,\"score\":7","body":"x","locked":false,"score":12,"post_count":2},"posts":[{"id":2,"score":5}]}"#;
        assert_eq!(String::from_utf8_lossy(&new), String::from_utf8_lossy(want));
        let back = with_topic_score(&new, -3).expect("a topic rendering");
        assert_eq!(&back[..], &body[..]);
    }

    #[test]
    fn what_is_not_a_topic_rendering_is_left_alone() {
        assert_eq!(with_topic_score(b"", 1), None, "the public view of a removed topic");
        assert_eq!(with_topic_score(br#"{"posts":[{"id":2,"score":5}]}"#, 1), None);
        assert_eq!(with_topic_score(br#"{"topic":{"id":1,"score":null}}"#, 1), None);
    }

    #[test]
    fn a_rendered_topic_is_patched_where_it_says_its_score() {
        let topic = Topic {
            id: 4,
            community: "c".into(),
            author: Some("ann".into()),
            title: r#"the ,"score":1 trick"#.into(),
            body: Some(r#"quote "score":9"#.into()),
            body_html: None,
            url: None,
            created_at: Timestamp(0),
            edited_at: None,
            deleted: false,
            removed: false,
            locked: false,
            score: 41,
            post_count: 0,
            community_id: 1,
            author_id: 1,
            inbox: Vec::new(),
        };
        let render = |topic: &Topic| {
            serde_json::to_vec(&TopicResponse { topic, posts: Vec::new(), next: None }).expect("serialises")
        };
        let patched = with_topic_score(&render(&topic), 42).expect("a topic rendering");
        assert_eq!(patched, render(&Topic { score: 42, ..topic }));
    }
}
