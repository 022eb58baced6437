//! Read-only pages: the front page and community listings (hot, new, top
//! with cursor paging), the community list, profiles and search.

use askama::Template;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, Uri};
use axum::response::Response;
use serde::Deserialize;

use super::view::{PostView, Time, TopicRow};
use super::{Ctx, Session, error_page};
use crate::app::federation::join::{self, Following};
use crate::app::limits::{Action, ClientIp, Who};
use crate::app::{AppError, AppResult};
use crate::app::{AppState, saves};
use crate::model::{Community, Post, SearchHit, Topic};
use crate::store::search::MAX_QUERY_CHARS;
use crate::store::{Cursor, ListTopics, Search, SearchKind, Store, TimeWindow, TopicSort};

/// Topics per listing page.
const PAGE: usize = 25;

#[derive(Deserialize, Default)]
pub struct ListParams {
    sort: Option<String>,
    t: Option<String>,
    after: Option<String>,
}

/// A validated listing request, with the names its links repeat.
pub struct Listing {
    pub sort: &'static str,
    pub t: &'static str,
    pub query: ListTopics,
}

impl Listing {
    pub fn parse(community: Option<String>, p: &ListParams) -> AppResult<Listing> {
        let bad = |m: &str| AppError::BadRequest("invalid_query", m.to_owned());
        let (t, window) = match p.t.as_deref() {
            None | Some("") | Some("day") => ("day", TimeWindow::Day),
            Some("week") => ("week", TimeWindow::Week),
            Some("month") => ("month", TimeWindow::Month),
            Some("year") => ("year", TimeWindow::Year),
            Some("all") => ("all", TimeWindow::All),
            Some(_) => return Err(bad("t must be one of day, week, month, year, all")),
        };
        let (sort, order) = match p.sort.as_deref() {
            None | Some("") | Some("hot") => ("hot", TopicSort::Hot),
            Some("new") => ("new", TopicSort::New),
            Some("top") => ("top", TopicSort::Top(window)),
            Some(_) => return Err(bad("sort must be one of hot, new, top")),
        };
        let after = match p.after.as_deref() {
            None | Some("") => None,
            Some(c) => Some(Cursor::decode(c).ok_or_else(|| bad("that page link is no longer valid"))?),
        };
        let fits = matches!(
            (after, order),
            (None, _)
                | (Some(Cursor::Hot(..)), TopicSort::Hot)
                | (Some(Cursor::New(..)), TopicSort::New)
                | (Some(Cursor::Top(..)), TopicSort::Top(_))
        );
        if !fits {
            return Err(bad("that page link belongs to another sort order"));
        }
        Ok(Listing { sort, t, query: ListTopics { community, sort: order, after, limit: PAGE, hide_blocked_by: None } })
    }
}

pub struct Tab {
    pub href: String,
    pub label: &'static str,
    pub current: bool,
}

#[derive(Template)]
#[template(path = "listing.html")]
struct ListingPage {
    ctx: Ctx,
    title: String,
    community: Option<Community>,
    tabs: Vec<Tab>,
    windows: Vec<Tab>,
    rows: Vec<TopicRow>,
    next: Option<String>,
    feed: String,
    /// The community's moderators, by name.
    moderators: Vec<String>,
    /// The viewer moderates this community (or is an admin): links to its
    /// reports and bans.
    moderator: bool,
    /// The signed-in viewer blocked this community from their front page.
    blocked: bool,
    /// A community on another server, to a signed-in viewer with
    /// federation on: where their follow of it stands (the button).
    following: Option<Following>,
}

pub async fn front<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    uri: Uri,
    Query(p): Query<ListParams>,
) -> Response {
    let ctx = Ctx::new(&session, &uri);
    match listing(&state, &ctx, None, &p).await {
        Ok(page) => ctx.page(StatusCode::OK, &page),
        Err(e) => error_page(&ctx, e),
    }
}

pub async fn community<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    uri: Uri,
    Path(name): Path<String>,
    Query(p): Query<ListParams>,
) -> Response {
    let ctx = Ctx::new(&session, &uri);
    match listing(&state, &ctx, Some(name), &p).await {
        Ok(page) => ctx.page(StatusCode::OK, &page),
        Err(e) => error_page(&ctx, e),
    }
}

async fn listing<S: Store>(
    state: &AppState<S>,
    ctx: &Ctx,
    name: Option<String>,
    p: &ListParams,
) -> AppResult<ListingPage> {
    let community = match &name {
        Some(n) if n.len() <= 64 => Some(state.store.community(n.clone()).await?),
        Some(_) => return Err(AppError::not_found("community")),
        None => None,
    };
    let l = Listing::parse(community.as_ref().map(|c| c.name.clone()), p)?;
    let moderators = match &community {
        Some(c) => state.store.moderators(c.name.clone()).await?,
        None => Vec::new(),
    };
    let moderator =
        community.is_some() && ctx.user.as_ref().is_some_and(|u| u.is_admin || moderators.iter().any(|m| m.id == u.id));
    let mut query = l.query.clone();
    let mut blocked = false;
    let mut following = None;
    if let Some(user) = &ctx.user {
        match &community {
            // A signed-in reader's front page leaves out what they blocked;
            // the signed-out one is the same for everyone.
            None => query.hide_blocked_by = Some(user.id),
            Some(c) => {
                blocked = saves::blocked(state, user).await?.contains(&c.name);
                if c.is_remote() && state.federation.get().is_some() {
                    following = Some(join::following(state, user, c).await?);
                }
            }
        }
    }
    let page = state.store.list_topics(query).await?;
    let base = community.as_ref().map_or("/".to_owned(), |c| format!("/c/{}", c.name));
    let tab = |key: &'static str, label| Tab { href: format!("{base}?sort={key}"), label, current: l.sort == key };
    let tabs = vec![tab("hot", "Hot"), tab("new", "New"), tab("top", "Top")];
    let windows = if l.sort == "top" {
        [("day", "Today"), ("week", "Week"), ("month", "Month"), ("year", "Year"), ("all", "All time")]
            .into_iter()
            .map(|(key, label)| Tab { href: format!("{base}?sort=top&t={key}"), label, current: l.t == key })
            .collect()
    } else {
        Vec::new()
    };
    let next = page.next.map(|c| format!("{base}?sort={}&t={}&after={}", l.sort, l.t, c.encode()));
    let mut rows: Vec<TopicRow> = page.topics.iter().map(TopicRow::of).collect();
    if let Some(user) = &ctx.user {
        // The personal layer: this reader's votes on the rows shown.
        let votes = saves::topic_votes(state, user, rows.iter().map(|r| r.id).collect()).await;
        for row in &mut rows {
            row.vote = votes.iter().find(|(id, _)| *id == row.id).map_or(0, |(_, v)| *v);
        }
    }
    let title = match &community {
        Some(c) => format!("{} · Pith", c.title),
        None => "Pith".to_owned(),
    };
    let feed = format!("{}/feed.atom", community.as_ref().map_or(String::new(), |c| format!("/c/{}", c.name)));
    Ok(ListingPage {
        ctx: ctx.clone(),
        title,
        community,
        tabs,
        windows,
        rows,
        next,
        feed,
        moderators: moderators.into_iter().map(|m| m.name).collect(),
        moderator,
        blocked,
        following,
    })
}

#[derive(Template)]
#[template(path = "communities.html")]
struct CommunitiesPage {
    ctx: Ctx,
    communities: Vec<Community>,
    /// Federation is on: a signed-in viewer may look for communities on
    /// other servers.
    federated: bool,
}

pub async fn communities<S: Store>(State(state): State<AppState<S>>, session: Session, uri: Uri) -> Response {
    let ctx = Ctx::new(&session, &uri);
    match state.store.list_communities().await {
        Ok(communities) => {
            let federated = state.federation.get().is_some();
            ctx.page(StatusCode::OK, &CommunitiesPage { ctx: ctx.clone(), communities, federated })
        }
        Err(e) => error_page(&ctx, e.into()),
    }
}

/// A profile's recent post, with where it was written.
struct ProfilePost {
    post: PostView,
    topic_id: i64,
}

#[derive(Template)]
#[template(path = "profile.html")]
struct ProfilePage {
    ctx: Ctx,
    name: String,
    is_admin: bool,
    /// A signed-in viewer other than this user: the "Send a message" link
    /// and the block button.
    can_block: bool,
    /// That viewer blocked this user.
    blocked: bool,
    joined: Time,
    /// A remote user's profile page at its home instance.
    home: Option<String>,
    rows: Vec<TopicRow>,
    posts: Vec<ProfilePost>,
}

pub async fn profile<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    uri: Uri,
    Path(name): Path<String>,
) -> Response {
    let ctx = Ctx::new(&session, &uri);
    if name.len() > 64 {
        return error_page(&ctx, AppError::not_found("user"));
    }
    let profile = match state.store.profile(name).await {
        Ok(p) => p,
        Err(e) => return error_page(&ctx, e.into()),
    };
    // The viewer's own controls: message and block, unless it is them.
    let blocked = match &ctx.user {
        Some(u) if u.id != profile.user.id => match saves::blocks(&state, u).await {
            Ok(b) => Some(b.users.iter().any(|n| n.eq_ignore_ascii_case(&profile.user.name))),
            Err(e) => return error_page(&ctx, e),
        },
        _ => None,
    };
    let visible = |t: &&Topic| !t.removed && !t.deleted;
    let shown = |p: &&Post| !p.removed && !p.deleted;
    let page = ProfilePage {
        name: profile.user.name.clone(),
        is_admin: profile.user.is_admin,
        can_block: blocked.is_some(),
        blocked: blocked.unwrap_or(false),
        joined: Time::of(profile.user.created_at),
        home: profile.home.clone(),
        rows: profile.topics.iter().filter(visible).map(TopicRow::of).collect(),
        posts: profile
            .posts
            .iter()
            .filter(shown)
            .map(|p| ProfilePost { post: PostView::of(p, None, 0), topic_id: p.topic_id })
            .collect(),
        ctx: ctx.clone(),
    };
    ctx.page(StatusCode::OK, &page)
}

#[derive(Deserialize)]
pub struct SearchParams {
    #[serde(default)]
    q: String,
}

/// A topic that matched, and the passage of its body that did.
pub struct TopicHit {
    pub row: TopicRow,
    /// HTML from the store: the text escaped, the matches in `<mark>`.
    pub snippet: String,
}

/// A reply that matched, with where it was written.
pub struct PostHit {
    pub post: PostView,
    pub topic_title: String,
    pub community: String,
    /// HTML from the store: the text escaped, the matches in `<mark>`.
    pub snippet: String,
}

/// What a search found, best first.
pub struct SearchHits {
    pub topics: Vec<TopicHit>,
    pub posts: Vec<PostHit>,
}

#[derive(Template)]
#[template(path = "search.html")]
struct SearchPage {
    ctx: Ctx,
    query: String,
    hits: SearchHits,
    /// The query looks like `!name@host` and the viewer may look it up
    /// on its server (signed in, federation on): the "find" button.
    find_remote: bool,
}

pub async fn search<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    uri: Uri,
    ip: ClientIp,
    Query(p): Query<SearchParams>,
) -> Response {
    let mut ctx = Ctx::new(&session, &uri);
    let query: String = p.q.trim().chars().take(MAX_QUERY_CHARS).collect();
    let hits = if query.is_empty() {
        SearchHits { topics: Vec::new(), posts: Vec::new() }
    } else {
        // The page shares the API's search budget.
        if let Err(e) = state.limits.check(Action::Search, ip, Who::Nobody) {
            return error_page(&ctx, e);
        }
        match find(&state, &query).await {
            Ok(h) => h,
            Err(e) => return error_page(&ctx, e),
        }
    };
    ctx.q = query.clone();
    let find_remote = ctx.user.is_some()
        && state.federation.get().is_some()
        && query.starts_with('!')
        && join::looks_like_handle(&query);
    let page = SearchPage { ctx: ctx.clone(), query, hits, find_remote };
    ctx.page(StatusCode::OK, &page)
}

/// The first page of matching topics and of matching replies, searched
/// side by side.
async fn find<S: Store>(state: &AppState<S>, query: &str) -> AppResult<SearchHits> {
    let ask = |kind| Search { text: query.to_owned(), kind, community: None, offset: 0, limit: PAGE };
    let (topics, posts) =
        tokio::try_join!(state.store.search(ask(SearchKind::Topics)), state.store.search(ask(SearchKind::Posts)))?;
    let mut hits = SearchHits { topics: Vec::new(), posts: Vec::new() };
    for hit in topics.hits.into_iter().chain(posts.hits) {
        match hit {
            SearchHit::Topic { topic, snippet } => hits.topics.push(TopicHit { row: TopicRow::of(&topic), snippet }),
            SearchHit::Post { post, topic_title, community, snippet } => {
                hits.posts.push(PostHit { post: PostView::of(&post, None, 0), topic_title, community, snippet })
            }
        }
    }
    Ok(hits)
}
