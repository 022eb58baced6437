//! One function per fuzz target: feeds the input to the real parser and
//! panics when a property fails. Every target must also never panic on its
//! own, whatever the bytes.

use axum::extract::Query;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use serde::Deserialize;

use super::inert;
use pith::api::live::LiveQuery;
use pith::api::topics::{ListQuery, TopicQuery, parse_list};
use pith::app::federation::{actors, content, signature};
use pith::app::read::{parse_post_cursor, parse_post_sort};
use pith::live::frame::{self, Head, HeadError, OP_CONTINUATION, OP_TEXT};
use pith::live::{Key, proto};
use pith::markdown;
use pith::media::{Limits, MediaName, process};
use pith::model::CommunityName;
use pith::model::federation::same_host;
use pith::net::fast;
use pith::net::hot::Answer;
use pith::store::{Cursor, PostCursor, TopicSort};

/// Markdown to HTML: inert, within the documented size bound, deterministic.
pub fn markdown(data: &[u8]) {
    let Ok(source) = std::str::from_utf8(data) else { return };
    let html = markdown::render(source);
    assert!(!html.to_ascii_lowercase().contains("<script"), "<script in {html:?}");
    if let Err(why) = inert::check(&html) {
        panic!("{why} in {html:?}");
    }
    assert!(html.len() <= markdown::max_len(source.len()), "{} bytes from {}", html.len(), source.len());
    assert_eq!(html, markdown::render(source), "rendering is not deterministic");
}

/// What a federation inbox POST meets before any store: the first line as
/// a `Signature` header (parsed, its signing string made, its date and
/// digest checked), the rest as the body, read as a fetched actor's
/// document (`actors::parse_actor`) and as a `Page` or `Note` whose text
/// is taken (`content`). Never a panic; an actor taken is on the host it
/// was fetched from, with a short plain name; remote HTML leaves no markup
/// of its own: every `<` and `>` in its text is escaped, and what it
/// renders to is inert.
pub fn activity(data: &[u8]) {
    let (head, body) = match data.iter().position(|&b| b == b'\n') {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    if let Ok(header) = std::str::from_utf8(head)
        && let Ok(sig) = signature::parse(header)
    {
        assert!(sig.headers.iter().all(|h| *h == h.to_ascii_lowercase()), "{:?}", sig.headers);
        let _ = signature::signing_string(&sig.headers, "POST", "/ap/inbox", |name| Some(format!("v-{name}")));
        let _ = signature::check(&sig, Some("Tue, 01 Jan 2030 00:00:00 GMT"), Some("SHA-256=x"), Some(body), 0);
    }
    let Ok(doc) = serde_json::from_slice::<serde_json::Value>(body) else {
        if let Ok(text) = std::str::from_utf8(body) {
            remote_html(text);
        }
        return;
    };
    const FROM: &str = "https://a.example/u/alice";
    if let Ok(actor) = actors::parse_actor(&doc, FROM) {
        for url in [&actor.id, &actor.inbox, &actor.key_id].into_iter().chain(actor.shared_inbox.as_ref()) {
            assert!(same_host(url, FROM), "{url} is not on the host the actor was fetched from");
        }
        assert!(actor.name.chars().count() <= 64 && !actor.name.chars().any(char::is_control), "{:?}", actor.name);
    }
    for object in [&doc, &doc["object"]] {
        // A Note replying to nothing is titled by its text: a valid title
        // or none.
        if let Some(title) = content::markdown_of(object).as_deref().and_then(content::title_of_note) {
            assert!(pith::model::Title::parse(&title).is_ok(), "{title:?}");
        }
        if let Some(link) = content::link_of(object) {
            assert!(link.starts_with("https://") || link.starts_with("http://"), "{link}");
        }
        if let Some(html) = object.get("content").and_then(serde_json::Value::as_str) {
            remote_html(html);
        }
    }
}

/// Remote HTML as text (`content::html_to_text`): each `<` and `>` escaped
/// (an odd run of backslashes before it), and its rendering inert.
fn remote_html(html: &str) {
    let text = content::html_to_text(html);
    let mut backslashes = 0;
    for c in text.chars() {
        if matches!(c, '<' | '>') {
            assert!(backslashes % 2 == 1, "an unescaped {c:?} in {text:?} from {html:?}");
        }
        backslashes = if c == '\\' { backslashes + 1 } else { 0 };
    }
    let rendered = markdown::render(&text);
    if let Err(why) = inert::check(&rendered) {
        panic!("{why} in {rendered:?} from {html:?}");
    }
}

/// A picture upload's decoder entry (`media::process::process`): any bytes
/// are refused or become a picture within the limits, whose bytes are the
/// format its kind says and whose name reads back; never a panic. The
/// pixel cap is small so each input decodes fast.
pub fn media(data: &[u8]) {
    let limits = Limits { max_pixels: 1_000_000, max_side: 256, thumb_side: 64 };
    let Ok(out) = process::process(data, &limits) else { return };
    for (picture, side) in [(&out.full, limits.max_side), (&out.thumb, limits.thumb_side)] {
        assert!(picture.width <= side && picture.height <= side, "{}x{}", picture.width, picture.height);
        assert!(picture.width >= 1 && picture.height >= 1);
        let format = process::sniff(&picture.bytes).expect("the output is a picture");
        assert_eq!(format.extensions_str()[0], out.kind.ext(), "the bytes are what the name says");
    }
    let name = MediaName::of(&out.full.bytes, out.full.width, out.full.height, out.kind);
    assert_eq!(MediaName::parse(&name.to_string()), Some(name));
}

/// The live protocol: the bytes as a JSON message, and as client frames.
pub fn live_proto(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        message(text);
    }
    let [pick, split, rest @ ..] = data else { return };
    // The hub clamps its limit to 125..=1 MiB; the extremes check that the
    // pure function itself holds up on any limit.
    let max = [0, 125, 4096, 1 << 20, usize::MAX][usize::from(*pick) % 5];
    let whole = decode(rest, max);
    // As it arrives from the socket: in two reads, with the unused tail of
    // the first held over. The result must not depend on where reads split.
    let cut = usize::from(*split).min(rest.len());
    let mut first = rest[..cut].to_vec();
    let mut frames = Vec::new();
    let used = frame::client_frames(&mut first, max, |h: Head, p: &mut [u8]| {
        frames.push((h, p.to_vec()));
        Ok::<(), HeadError>(())
    });
    let split_result = match used {
        Ok(used) => {
            let mut held = first[used..].to_vec();
            held.extend_from_slice(&rest[cut..]);
            let more = frame::client_frames(&mut held, max, |h: Head, p: &mut [u8]| {
                frames.push((h, p.to_vec()));
                Ok::<(), HeadError>(())
            });
            more.map(|m| used + m)
        }
        Err(e) => Err(e),
    };
    assert_eq!((whole.frames, whole.result), (frames, split_result), "split at {cut}");
}

struct Decoded {
    frames: Vec<(Head, Vec<u8>)>,
    result: Result<usize, HeadError>,
}

/// Decodes client frames as `Conn` does, checks each frame, and hands
/// complete text messages to `message`.
fn decode(bytes: &[u8], max: usize) -> Decoded {
    let mut buf = bytes.to_vec();
    let mut frames = Vec::new();
    // A fragmented text message being put together, as `Conn` does.
    let mut partial: Option<Vec<u8>> = None;
    let result = frame::client_frames(&mut buf, max, |head: Head, payload: &mut [u8]| {
        assert_eq!(payload.len(), head.len);
        assert!(head.len <= max && head.mask.is_some());
        assert!(!head.is_control() || (head.fin && head.len <= frame::MAX_CONTROL));
        round_trip(head, payload);
        frames.push((head, payload.to_vec()));
        match (head.opcode, partial.as_mut()) {
            (OP_TEXT, None) if head.fin => text(payload),
            (OP_TEXT, None) => partial = Some(payload.to_vec()),
            (OP_CONTINUATION, Some(msg)) if msg.len() + payload.len() <= max => {
                msg.extend_from_slice(payload);
                if head.fin {
                    text(&partial.take().unwrap_or_default());
                }
            }
            (op, _) if op & 0x8 == 0 => partial = None,
            _ => {}
        }
        Ok::<(), HeadError>(())
    });
    if let Ok(used) = result {
        assert!(used <= bytes.len());
    }
    Decoded { frames, result }
}

/// A decoded frame, framed again by the server's own encoder, decodes to
/// the same opcode and payload.
fn round_trip(head: Head, payload: &[u8]) {
    let Some(mask) = head.mask else { return };
    if !head.fin {
        return;
    }
    let bytes = frame::frame(head.opcode, payload, Some(mask));
    let mut again = bytes.to_vec();
    let mut seen = None;
    let used = frame::client_frames(&mut again, payload.len(), |h: Head, p: &mut [u8]| {
        seen = Some((h.opcode, p.to_vec()));
        Ok::<(), HeadError>(())
    });
    assert_eq!(used, Ok(bytes.len()));
    assert_eq!(seen, Some((head.opcode, payload.to_vec())));
}

fn text(payload: &[u8]) {
    if let Ok(t) = std::str::from_utf8(payload) {
        message(t);
    }
}

/// A client's JSON message, and the hub keys of a (un)subscribe.
fn message(text: &str) {
    let (topics, communities) = match proto::parse(text) {
        Ok(proto::Request::Subscribe { topics, communities })
        | Ok(proto::Request::Unsubscribe { topics, communities }) => (topics, communities),
        _ => return,
    };
    if let Ok(keys) = proto::keys(&topics, &communities) {
        assert!(keys.len() <= topics.len() + communities.len());
        check_keys(&keys);
    }
}

/// Keys are sorted, unique, positive topic ids and names of communities
/// (local or followed from another server).
fn check_keys(keys: &[Key]) {
    assert!(keys.windows(2).all(|w| w[0] < w[1]), "not sorted and unique: {keys:?}");
    for k in keys {
        match k {
            Key::Topic(t) => assert!(*t > 0),
            // A local name, or a remote community's `name@host` (phase 2).
            Key::Community(c) => assert!(CommunityName::named(c).is_ok(), "{c:?}"),
            Key::Inbox(_) => panic!("a query or message named an inbox"),
        }
    }
}

/// Pagination cursors, of listings and of a huge topic's posts: whatever
/// decodes re-encodes to something that decodes to the same cursor, and
/// every cursor the server can make decodes back.
pub fn cursor(data: &[u8]) {
    if let Ok(s) = std::str::from_utf8(data) {
        if let Some(c) = Cursor::decode(s) {
            same_after_round_trip(c);
        }
        if let Some(c) = PostCursor::decode(s) {
            same_post_cursor_after_round_trip(c);
        }
    }
    if let [kind, rest @ ..] = data
        && let (Some(a), Some(b)) = (rest.get(..8), rest.get(8..16))
    {
        let a: [u8; 8] = a.try_into().unwrap_or_default();
        let id = i64::from_le_bytes(b.try_into().unwrap_or_default());
        let c = match kind % 3 {
            0 => Cursor::Hot(f64::from_le_bytes(a), id),
            1 => Cursor::New(i64::from_le_bytes(a), id),
            _ => Cursor::Top(i64::from_le_bytes(a), id),
        };
        // Hot scores are finite; the server never makes any other.
        if !matches!(c, Cursor::Hot(h, _) if !h.is_finite()) {
            same_after_round_trip(c);
        }
        let key = i64::from_le_bytes(a);
        same_post_cursor_after_round_trip(match kind % 3 {
            0 => PostCursor::Best(key, id),
            1 => PostCursor::New(id),
            _ => PostCursor::Old(id),
        });
    }
}

fn same_post_cursor_after_round_trip(c: PostCursor) {
    let s = c.encode();
    assert!(s.len() <= 100, "{c:?} encodes too long to decode: {s}");
    assert_eq!(PostCursor::decode(&s), Some(c), "{s}");
}

fn same_after_round_trip(c: Cursor) {
    let s = c.encode();
    assert!(s.len() <= 100, "{c:?} encodes too long to decode: {s}");
    assert_eq!(Cursor::decode(&s), Some(c), "{s}");
}

/// `LiveQuery`'s fields, which are private to `api::live`: the same names
/// and types, so the same strings deserialize.
#[derive(Deserialize)]
struct LiveParams {
    topics: Option<String>,
    communities: Option<String>,
    #[serde(rename = "token")]
    _token: Option<String>,
}

/// Query strings of the listing, topic and live routes, through axum's
/// `Query` extractor (what `http::extract::Query` wraps) and the handlers'
/// validation.
pub fn query(data: &[u8]) {
    let Ok(q) = std::str::from_utf8(data) else { return };
    // What hyper would not accept as a request target never reaches a handler.
    let Ok(uri) = format!("/api/v1/topics?{q}").parse::<Uri>() else { return };
    if let Ok(Query(list)) = Query::<ListQuery>::try_from_uri(&uri)
        && let Ok(l) = parse_list(None, list)
    {
        assert!((1..=100).contains(&l.limit));
        let agrees = matches!(
            (l.after, l.sort),
            (None, _)
                | (Some(Cursor::Hot(..)), TopicSort::Hot)
                | (Some(Cursor::New(..)), TopicSort::New)
                | (Some(Cursor::Top(..)), TopicSort::Top(_))
        );
        assert!(agrees, "{:?} after a cursor of another sort", l.sort);
        if let Some(c) = l.after {
            same_after_round_trip(c);
        }
    }
    if let Ok(Query(t)) = Query::<TopicQuery>::try_from_uri(&uri)
        && let Ok(sort) = parse_post_sort(t.sort.as_deref())
        && let Ok(Some(after)) = parse_post_cursor(t.after.as_deref(), sort)
    {
        assert_eq!(after.sort(), sort, "a page after a cursor of another order");
    }
    let _ = Query::<LiveQuery>::try_from_uri(&uri);
    if let Ok(Query(live)) = Query::<LiveParams>::try_from_uri(&uri) {
        for max in [0, 1, 32] {
            if let Ok(keys) = proto::query_keys(live.topics.as_deref(), live.communities.as_deref(), max) {
                assert!(keys.len() <= max, "{} keys with at most {max}", keys.len());
                check_keys(&keys);
            }
        }
    }
}

/// A parked connection's next request (`pith::net::fast::answer`): never
/// panics, and reaches the hot path only with one whole `GET` head of
/// HTTP/1.1, nothing after it, no header that changes the framing, and
/// the target and headers as sent.
pub fn request_head(data: &[u8]) {
    let seen = Seen::default();
    let answered = fast::answer(data, &seen).is_some();
    let calls = std::mem::take(&mut *seen.0.lock().unwrap_or_else(|p| p.into_inner()));
    assert_eq!(answered, calls.len() == 1, "answered without the hot path, or asked it twice");
    let Some((target, if_none_match)) = calls.into_iter().next() else { return };
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut req = httparse::Request::new(&mut headers);
    assert_eq!(req.parse(data), Ok(httparse::Status::Complete(data.len())), "not exactly one whole head");
    assert_eq!((req.method, req.version, req.path), (Some("GET"), Some(1), Some(target.as_str())));
    assert!(target.starts_with('/'));
    for h in req.headers.iter() {
        let framing = ["content-length", "transfer-encoding", "upgrade", "expect"];
        assert!(!framing.iter().any(|n| h.name.eq_ignore_ascii_case(n)), "{} reached the hot path", h.name);
        assert!(!h.name.eq_ignore_ascii_case("connection") || h.value.eq_ignore_ascii_case(b"keep-alive"));
    }
    assert_eq!(if_none_match.as_deref(), fast::header(req.headers, "if-none-match"));
}

/// A hot path that records what it is asked and answers everything.
#[derive(Default)]
struct Seen(std::sync::Mutex<Vec<(String, Option<Vec<u8>>)>>);

impl Answer for Seen {
    fn answer(&self, _: &Method, _: &Uri, _: &HeaderMap, _: bool) -> Option<axum::response::Response> {
        None
    }

    fn answer_framed(&self, target: &str, headers: &[httparse::Header<'_>]) -> Option<fast::Framed> {
        let inm = fast::header(headers, "if-none-match").map(<[u8]>::to_vec);
        self.0.lock().unwrap_or_else(|p| p.into_inner()).push((target.to_owned(), inm));
        Some(fast::frame(StatusCode::OK, &[], Some(bytes::Bytes::new())))
    }
}
