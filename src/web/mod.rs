//! The web forum: server-rendered HTML pages over the same store, limits
//! and token table as the JSON API. Every page works without JavaScript
//! (forms post and redirect); `static/app.js` only adds live posts, voting
//! and replying in place, and relative times. docs/WEB.md describes the
//! URL scheme, sessions, CSRF and the Content-Security-Policy.
//!
//! - `session`: cookie sessions and CSRF tokens.
//! - `assets`: the embedded, fingerprinted, pre-gzipped CSS, JS and icon.
//! - `view`: what templates show (times, topic rows, the post tree).
//! - `forms`: what every form handler shares (CSRF check, login redirect).
//! - `pages`: listings, communities, profiles, search.
//! - `topic`: the topic page (cached for signed-out readers) and the
//!   single-post fragment.
//! - `reply`: replying and voting.
//! - `saves`: saving topics and comments, the saved page, blocking a
//!   community from the front page or a user, the blocks page.
//! - `messages`: conversations, sending and reporting private messages,
//!   the administrators' reported messages.
//! - `write`: submitting, editing and deleting topics and posts.
//! - `moderate`: removing, restoring, locking; reports and the queue; the
//!   moderation log.
//! - `bans`: community and site bans; `moderators`: a community's
//!   moderators, appointed and dismissed by administrators.
//! - `admin`: the site settings page (registration, invites);
//!   `instances`: the rules for other servers (federation).
//! - `account`: log in, register, log out.
//! - `inbox`: the user's notifications, marking them read, and the live
//!   stream (inbox and topics) the script listens to when signed in.
//! - `settings`: the user's own account: password, sessions.
//! - `email`: "forgot password" and the reset link's form, the page a
//!   confirmation link opens, and the email settings page.
//! - `settings`: the user's own account: password, sessions; `lifecycle`:
//!   its two-factor login, export and deletion forms.
//! - `feed`: Atom feeds.
//! - `media`: the site's pictures served from their files, and a page's
//!   upload (session and CSRF token); `picture_form`: the new-topic and
//!   comment forms' picture, sent in the form itself without JavaScript.
//! - `setup`: the first run's one-time link that creates the administrator.

mod account;
mod admin;
pub mod assets;
mod bans;
mod email;
mod feed;
mod forms;
mod inbox;
mod instances;
mod join;
mod lifecycle;
mod media;
mod messages;
mod moderate;
mod moderators;
mod pages;
mod picture_form;
mod reply;
mod saves;
pub mod session;
mod settings;
pub mod setup;
mod topic;
mod view;
mod write;

use std::io::Write;

use askama::Template;
use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};

pub use session::Session;
pub use topic::render_topic_page;

use crate::app::{AppError, AppState};
use crate::cache::accepts_gzip;
use crate::model::User;
use crate::store::Store;

/// The policy of every page: no inline script or style, nothing from
/// another origin, no framing. Images may be `data:` URLs: the QR code of
/// a two-factor enrolment is one, drawn by the server.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                       connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

pub fn router<S: Store>() -> Router<AppState<S>> {
    Router::new()
        .route("/", get(pages::front::<S>))
        .route("/feed.atom", get(feed::front::<S>))
        .route("/c", get(pages::communities::<S>))
        .route("/c/{name}", get(pages::community::<S>))
        .route("/c/{name}/feed.atom", get(feed::community::<S>))
        .route("/u/{name}", get(pages::profile::<S>))
        .route("/search", get(pages::search::<S>))
        // These two take a picture in the form (`picture_form`), which
        // applies the limits itself.
        .route(
            "/submit",
            get(write::submit_form::<S>).post(write::submit::<S>).layer(axum::extract::DefaultBodyLimit::disable()),
        )
        .route("/t/{id}", get(topic::show::<S>))
        .route("/t/{id}/{slug}", get(topic::slug_redirect))
        .route(
            "/t/{id}/reply",
            get(reply::reply_form::<S>).post(reply::reply::<S>).layer(axum::extract::DefaultBodyLimit::disable()),
        )
        .route("/t/{id}/vote", post(reply::vote::<S>))
        .route("/t/{id}/edit", get(write::edit_topic_form::<S>).post(write::edit_topic::<S>))
        .route("/t/{id}/delete", post(write::delete_topic::<S>))
        .route("/t/{id}/moderate", post(moderate::topic::<S>))
        .route("/t/{id}/report", get(moderate::report_form::<S>).post(moderate::report::<S>))
        .route("/t/{id}/p/{post}", get(topic::post_fragment::<S>))
        .route("/t/{id}/p/{post}/edit", get(write::edit_post_form::<S>).post(write::edit_post::<S>))
        .route("/t/{id}/p/{post}/delete", post(write::delete_post::<S>))
        .route("/t/{id}/p/{post}/moderate", post(moderate::post::<S>))
        .route("/p/{post}/vote", post(reply::vote::<S>))
        .route("/t/{id}/save", post(saves::save::<S>))
        .route("/p/{post}/save", post(saves::save::<S>))
        .route("/saved", get(saves::page::<S>))
        .route("/c/{name}/block", post(saves::block::<S>))
        .route("/c/{name}/follow", post(join::follow::<S>))
        .route("/join", post(join::find::<S>))
        .route("/u/{name}/block", post(saves::block::<S>))
        .route("/blocks", get(saves::blocks::<S>))
        .route("/messages", get(messages::list::<S>))
        .route("/messages/{name}", get(messages::show::<S>).post(messages::send::<S>))
        .route("/messages/{name}/report", post(messages::report::<S>))
        .route("/admin/message-reports", get(messages::reports::<S>))
        .route("/admin/message-reports/{id}", post(messages::resolve::<S>))
        .route("/c/{name}/reports", get(moderate::reports::<S>))
        .route("/c/{name}/reports/{id}", post(moderate::resolve::<S>))
        .route("/c/{name}/modlog", get(moderate::community_log::<S>))
        .route("/c/{name}/moderators", get(moderators::show::<S>).post(moderators::set::<S>))
        .route("/modlog", get(moderate::site_log::<S>))
        .route("/c/{name}/bans", get(bans::community::<S>).post(bans::ban_in_community::<S>))
        .route("/c/{name}/unban", post(bans::unban_in_community::<S>))
        .route("/admin", get(admin::show::<S>))
        .route("/admin/settings", post(admin::settings::<S>))
        .route("/admin/invites", post(admin::invite::<S>))
        .route("/admin/federation", get(instances::show::<S>).post(instances::set::<S>))
        .route("/admin/bans", post(bans::ban_site::<S>))
        .route("/admin/unban", post(bans::unban_site::<S>))
        .route("/login", get(account::login_form).post(account::login::<S>))
        .route("/register", get(account::register_form::<S>).post(account::register::<S>))
        .route("/logout", post(account::logout::<S>))
        .route("/inbox", get(inbox::show::<S>))
        .route("/inbox/read", post(inbox::mark_read::<S>))
        .route("/inbox/live", get(inbox::live::<S>))
        .route("/settings", get(settings::show::<S>))
        .route("/settings/email", get(email::settings::<S>).post(email::set_address::<S>))
        .route("/settings/email/digest", post(email::set_digest::<S>))
        .route("/reset", get(email::ask_form).post(email::ask::<S>))
        .route("/reset/{token}", get(email::choose_form).post(email::choose::<S>))
        .route("/verify/{token}", get(email::verify::<S>))
        .route("/settings/password", post(settings::change_password::<S>))
        .route("/settings/sessions/revoke-others", post(settings::revoke_others::<S>))
        .route("/settings/sessions/{id}/revoke", post(settings::revoke::<S>))
        .route("/settings/export", get(lifecycle::export::<S>))
        .route("/settings/delete", post(lifecycle::delete::<S>))
        .route("/settings/two-factor/start", post(lifecycle::two_factor_start::<S>))
        .route("/settings/two-factor/confirm", post(lifecycle::two_factor_confirm::<S>))
        .route("/settings/two-factor/disable", post(lifecycle::two_factor_disable::<S>))
        .route("/setup/{token}", get(setup::form::<S>).post(setup::create::<S>))
        .route("/static/{file}", get(assets::serve))
        .route("/media", post(media::upload_from_page::<S>).layer(axum::extract::DefaultBodyLimit::disable()))
        .route("/media/{name}", get(media::serve::<S>))
        .layer(axum::middleware::from_fn(harden))
}

/// What every page's layout needs: the viewer, their CSRF token, where
/// they are (for "back" after a vote and "next" after logging in) and the
/// asset URLs.
#[derive(Clone)]
pub struct Ctx {
    pub user: Option<User>,
    /// The signed-in user's unread notifications, for the header's
    /// "Inbox (N)" (0 for everyone else, so public pages stay the same
    /// bytes for all).
    pub unread: i64,
    pub csrf: String,
    /// Path and query of this page.
    pub here: String,
    /// The search box's text.
    pub q: String,
    pub css: &'static str,
    pub js: &'static str,
    pub icon: &'static str,
    /// The anonymous CSRF cookie to set with this page, when new.
    set_cookie: Option<HeaderValue>,
}

impl Ctx {
    /// A page's context. A signed-out visitor's pages carry no token and
    /// set no cookie (their only forms, log in and register, use
    /// `with_anon_csrf`), so every visitor gets the same bytes.
    pub fn new(session: &Session, uri: &Uri) -> Ctx {
        Ctx {
            user: session.user.clone(),
            unread: session.unread.unwrap_or(0),
            csrf: if session.user.is_some() { session.csrf() } else { String::new() },
            here: uri.path_and_query().map_or("/", |p| p.as_str()).to_owned(),
            q: String::new(),
            css: &assets::CSS.url,
            js: &assets::JS.url,
            icon: &assets::ICON.url,
            set_cookie: None,
        }
    }

    /// For a page with an anonymous form: its double-submit token, and the
    /// cookie that carries it when the visitor has none yet.
    pub fn with_anon_csrf(session: &Session, uri: &Uri) -> Ctx {
        Ctx { csrf: session.csrf(), set_cookie: session.anon_cookie(), ..Ctx::new(session, uri) }
    }

    /// For pages rendered without a session (errors).
    fn bare() -> Ctx {
        Ctx::public("/".into())
    }

    /// A signed-out visitor's context at `here`, for pages rendered once
    /// for everyone (the cached topic page).
    pub fn public(here: String) -> Ctx {
        Ctx {
            user: None,
            unread: 0,
            csrf: String::new(),
            here,
            q: String::new(),
            css: &assets::CSS.url,
            js: &assets::JS.url,
            icon: &assets::ICON.url,
            set_cookie: None,
        }
    }

    pub fn user_name(&self) -> &str {
        self.user.as_ref().map_or("", |u| u.name.as_str())
    }

    /// Renders a page with `status`; a template that fails to render is a
    /// bug, answered 500.
    pub fn page(&self, status: StatusCode, t: &impl Template) -> Response {
        match t.render() {
            Ok(html) => self.html(status, html),
            Err(e) => {
                tracing::error!(error = %e, "template failed");
                (StatusCode::INTERNAL_SERVER_ERROR, "internal error\n").into_response()
            }
        }
    }
}

impl Ctx {
    /// A page rendered for this request alone.
    pub fn html(&self, status: StatusCode, html: String) -> Response {
        let mut res = (status, html_type(), html).into_response();
        res.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("private, no-cache"));
        if let Some(c) = &self.set_cookie {
            res.headers_mut().append(header::SET_COOKIE, c.clone());
        }
        res
    }
}

fn html_type() -> [(header::HeaderName, HeaderValue); 1] {
    [(header::CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"))]
}

#[derive(Template)]
#[template(path = "error.html")]
struct ErrorPage<'a> {
    ctx: &'a Ctx,
    status: u16,
    heading: &'a str,
    message: String,
}

fn heading_of(status: StatusCode) -> &'static str {
    match status {
        StatusCode::NOT_FOUND => "Not found",
        StatusCode::FORBIDDEN => "Not allowed",
        StatusCode::TOO_MANY_REQUESTS => "Slow down",
        s if s.is_server_error() => "Something went wrong",
        _ => "That did not work",
    }
}

/// An HTML error page for `err`, with its status.
pub fn error_page(ctx: &Ctx, err: AppError) -> Response {
    let status = err.status();
    let heading = match err.code() {
        "banned" => "You are banned",
        "topic_locked" => "This topic is locked",
        _ => heading_of(status),
    };
    err.report();
    let message = match &err {
        AppError::Internal(_) => "The server failed to answer. Try again in a moment.".to_owned(),
        AppError::Unavailable(_) => "The forum cannot store writes right now; try again later.".to_owned(),
        other => capitalise(&other.to_string()),
    };
    let mut res = ctx.page(status, &ErrorPage { ctx, status: status.as_u16(), heading, message });
    if let AppError::TooManyRequests(_, after) = err {
        res.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(after.as_secs().max(1)));
    }
    res
}

/// The HTML 404 for a path no route matches, for browsers.
pub fn not_found_page(uri: &Uri) -> Response {
    error_page(&Ctx::bare(), AppError::NotFound(format!("page {}", uri.path())))
}

/// Does the client want a page rather than JSON (a browser navigating)?
pub fn wants_html(headers: &HeaderMap) -> bool {
    headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).is_some_and(|v| v.contains("text/html"))
}

fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(first) => first.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

/// 303 See Other: the answer to every successful form post. A target no
/// header can hold (a bug: callers pass `local_path`s or paths they built)
/// goes home rather than failing after the work was done.
pub fn see_other(to: &str) -> Response {
    let to = HeaderValue::from_str(to).unwrap_or(HeaderValue::from_static("/"));
    (StatusCode::SEE_OTHER, [(header::LOCATION, to)]).into_response()
}

/// `to` when it is a path on this site, else `/` (no open redirects):
/// one leading `/` (a second would make `//host`), printable ASCII only
/// (no whitespace or control characters, which browsers strip or a header
/// refuses, and no raw non-ASCII), no backslash (read as `/`), and a valid
/// path and query before any `#`. Browsers send non-ASCII percent-encoded,
/// so no path of this site is refused.
pub fn local_path(to: &str) -> &str {
    let path = to.split('#').next().unwrap_or_default();
    let ok = to.starts_with('/')
        && !to.starts_with("//")
        && to.bytes().all(|b| b.is_ascii_graphic() && b != b'\\')
        && path.parse::<axum::http::uri::PathAndQuery>().is_ok();
    if ok { to } else { "/" }
}

/// Security headers on every response, and gzip for pages and feeds.
async fn harden(req: Request, next: Next) -> Response {
    let gzip_ok = accepts_gzip(req.headers());
    let res = next.run(req).await;
    let mut res = if gzip_ok { compress(res).await } else { res };
    let h = res.headers_mut();
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    res
}

/// Gzips a page or feed (fast level: it is compressed per request).
async fn compress(res: Response) -> Response {
    let compressible = res.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|t| {
        t.starts_with("text/html") || t.starts_with("application/atom+xml") || t.starts_with("text/plain")
    });
    if !compressible || res.headers().contains_key(header::CONTENT_ENCODING) {
        return res;
    }
    let (mut parts, body) = res.into_parts();
    // Pages are bounded (`PageLimit::WEB`); a body past this is a bug,
    // and its 500 says so in the log.
    let bytes = match axum::body::to_bytes(body, crate::net::MAX_BODY_BYTES * 64).await {
        Ok(bytes) => bytes,
        Err(e) => {
            tracing::error!(error = %e, limit = crate::net::MAX_BODY_BYTES * 64, "page too large to compress");
            return (StatusCode::INTERNAL_SERVER_ERROR, "internal error\n").into_response();
        }
    };
    if bytes.len() < 512 {
        return Response::from_parts(parts, Body::from(bytes));
    }
    let mut enc = flate2::write::GzEncoder::new(Vec::with_capacity(bytes.len() / 4), flate2::Compression::fast());
    let gz = enc.write_all(&bytes).ok().and_then(|_| enc.finish().ok());
    match gz {
        Some(gz) => {
            parts.headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
            parts.headers.append(header::VARY, HeaderValue::from_static("accept-encoding"));
            parts.headers.remove(header::CONTENT_LENGTH);
            Response::from_parts(parts, Body::from(gz))
        }
        None => Response::from_parts(parts, Body::from(bytes)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_paths_on_this_site_are_redirect_targets() {
        assert_eq!(local_path("/t/1#p2"), "/t/1#p2");
        assert_eq!(local_path("//evil.example/"), "/");
        assert_eq!(local_path("https://evil.example/"), "/");
        assert_eq!(local_path("/\\evil.example"), "/");
        assert_eq!(local_path("/c?sort=new&t=week"), "/c?sort=new&t=week");
        assert_eq!(local_path("/search?q=caf%C3%A9"), "/search?q=caf%C3%A9");
        for hostile in
            ["/\t/evil.example/x", "/\u{b}/evil.example", "/\u{c}/evil.example", "/ /x", "/\u{a0}x", "/é", ""]
        {
            assert_eq!(local_path(hostile), "/", "{hostile:?}");
        }
    }
}
