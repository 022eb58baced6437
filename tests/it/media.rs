//! Pictures (issue #22), through the API on both stores: real pictures
//! made here with the `image` crate, uploaded as multipart/form-data;
//! what is stored (upright, shrunk, no EXIF), what is refused (a real
//! decompression bomb, lying and broken files, each quota, the byte limit,
//! the rate limit), serving (type, caching, nosniff, ranges, HEAD),
//! deduplication, Markdown, and removal with the posts and accounts that
//! showed them.

use std::io::Cursor;

use image::{DynamicImage, ImageFormat, Rgb, RgbImage};
use pith::app::RateConfig;
use pith::app::limits::Rate;
use pith::app::media::MediaConfig;
use pith::media::MediaName;
use pith::store::Store;
use reqwest::Method;
use serde_json::json;

use crate::support::helpers::{
    Reply, TestApp, assert_error, fetch, spawn_app, spawn_app_media, spawn_pg_app, spawn_pg_app_media,
};
use crate::support::pg::TestDb;

const BOUNDARY: &str = "pith-test-boundary-7d1c";

/// A multipart/form-data body with the one field `file`.
fn form(filename: &str, content_type: &str, bytes: &[u8]) -> Vec<u8> {
    let mut body = format!(
        "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{filename}\"\r\n\
         Content-Type: {content_type}\r\n\r\n"
    )
    .into_bytes();
    body.extend_from_slice(bytes);
    body.extend_from_slice(format!("\r\n--{BOUNDARY}--\r\n").as_bytes());
    body
}

async fn upload<S: Store>(app: &TestApp<S>, token: &str, filename: &str, content_type: &str, bytes: &[u8]) -> Reply {
    let req = app
        .req(Method::POST, "/api/v1/media")
        .bearer_auth(token)
        .header("content-type", format!("multipart/form-data; boundary={BOUNDARY}"))
        .body(form(filename, content_type, bytes));
    fetch(req).await
}

/// A photograph-like picture: smooth gradients and noise, so it has many
/// colours (JPEG) and does not compress to nothing.
fn photo(w: u32, h: u32, seed: u32) -> RgbImage {
    let mut state = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
    RgbImage::from_fn(w, h, |x, y| {
        state = state.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        let noise = (state >> 24) as u8 / 4;
        Rgb([(x * 255 / w) as u8 ^ noise, (y * 255 / h) as u8 ^ noise, ((x + y) % 256) as u8 ^ noise])
    })
}

fn encode(img: RgbImage, format: ImageFormat) -> Vec<u8> {
    let mut out = Cursor::new(Vec::new());
    DynamicImage::ImageRgb8(img).write_to(&mut out, format).expect("encode");
    out.into_inner()
}

/// A JPEG of `img` with an EXIF block (APP1) saying "rotate 90°
/// clockwise to show" and holding a GPS position (51° 30' 44.6" N).
fn jpeg_with_exif_gps(img: RgbImage) -> Vec<u8> {
    let le16 = |v: u16| v.to_le_bytes().to_vec();
    let le32 = |v: u32| v.to_le_bytes().to_vec();
    let mut tiff = b"II\x2a\x00".to_vec();
    tiff.extend(le32(8));
    // IFD0 at 8: Orientation = 6, and the GPS IFD's offset (38).
    tiff.extend(le16(2));
    tiff.extend([le16(0x0112), le16(3), le32(1), le16(6), le16(0)].concat());
    tiff.extend([le16(0x8825), le16(4), le32(1), le32(38)].concat());
    tiff.extend(le32(0));
    // The GPS IFD at 38: latitude reference "N", latitude at 68.
    tiff.extend(le16(2));
    tiff.extend([le16(0x0001), le16(2), le32(2), b"N\0\0\0".to_vec()].concat());
    tiff.extend([le16(0x0002), le16(5), le32(3), le32(68)].concat());
    tiff.extend(le32(0));
    assert_eq!(tiff.len(), 68);
    tiff.extend([le32(51), le32(1), le32(30), le32(1), le32(4460), le32(100)].concat());
    let mut app1 = b"Exif\0\0".to_vec();
    app1.extend(tiff);
    let jpeg = encode(img, ImageFormat::Jpeg);
    let mut out = jpeg[..2].to_vec();
    out.extend([0xFF, 0xE1]);
    out.extend(u16::try_from(app1.len() + 2).expect("short").to_be_bytes());
    out.extend(app1);
    out.extend(&jpeg[2..]);
    out
}

/// A real decompression bomb: a valid PNG declaring 60000x60000 RGB
/// pixels (10.8 GB decoded), its image data ~10 KB of deflated zeros.
fn png_bomb() -> Vec<u8> {
    fn chunk(out: &mut Vec<u8>, kind: &[u8], data: &[u8]) {
        out.extend(u32::try_from(data.len()).expect("len").to_be_bytes());
        let mut crc = flate2::Crc::new();
        crc.update(kind);
        crc.update(data);
        out.extend(kind);
        out.extend(data);
        out.extend(crc.sum().to_be_bytes());
    }
    let mut ihdr = 60_000u32.to_be_bytes().to_vec();
    ihdr.extend(60_000u32.to_be_bytes());
    ihdr.extend([8, 2, 0, 0, 0]);
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    std::io::Write::write_all(&mut z, &vec![0u8; 10 << 20]).expect("deflate");
    let idat = z.finish().expect("deflate");
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    chunk(&mut out, b"IHDR", &ihdr);
    chunk(&mut out, b"IDAT", &idat);
    chunk(&mut out, b"IEND", &[]);
    out
}

/// The file of a stored picture, from the data directory.
fn file_of<S: Store>(app: &TestApp<S>, url: &str) -> std::path::PathBuf {
    let name = MediaName::parse(url.trim_start_matches("/media/")).expect("a picture's name");
    app.dir.path().join("media").join(name.shard()).join(name.to_string())
}

async fn uploading_story<S: Store>(app: &TestApp<S>) {
    let alice = app.user("alice").await;

    // A phone photo: sideways pixels, an orientation tag and a position.
    let original = jpeg_with_exif_gps(photo(3000, 1200, 1));
    let res = upload(app, &alice, "IMG_0001.JPG", "image/jpeg", &original).await;
    assert_eq!(res.status, 201, "{:?}", res.json());
    let pic = res.json();
    let url = pic["url"].as_str().expect("url").to_owned();
    assert_eq!(res.header("location"), Some(url.as_str()));
    // 1200x3000 upright, then shrunk to a long side of 2048.
    let width = pic["width"].as_u64().expect("width");
    assert!((819..=820).contains(&width) && pic["height"] == 2048, "turned upright, then shrunk: {pic}");
    assert_eq!(pic["content_type"], "image/jpeg");
    assert_eq!(url, format!("/media/{}", pic["id"].as_str().expect("id")));
    let thumb_url = pic["thumbnail_url"].as_str().expect("thumbnail").to_owned();

    let full = fetch(app.req(Method::GET, &url)).await;
    assert_eq!(full.status, 200);
    let thumb_bytes = std::fs::metadata(file_of(app, &thumb_url)).expect("thumbnail's file").len();
    assert_eq!(full.bytes.len() as u64 + thumb_bytes, pic["bytes"].as_u64().expect("bytes"));
    assert_eq!(full.header("content-type"), Some("image/jpeg"));
    assert_eq!(full.header("cache-control"), Some("public, max-age=31536000, immutable"));
    assert_eq!(full.header("x-content-type-options"), Some("nosniff"));
    let stored = image::load_from_memory(&full.bytes).expect("a picture");
    assert_eq!((u64::from(stored.width()), stored.height()), (width, 2048));
    for gone in [&b"Exif"[..], b"II\x2a\x00", &[51, 0, 0, 0, 1, 0, 0, 0]] {
        assert!(!full.bytes.windows(gone.len()).any(|w| w == gone), "metadata {gone:?} is gone");
    }
    assert!(full.bytes.len() < original.len(), "smaller than what was sent");
    let thumb = fetch(app.req(Method::GET, &thumb_url)).await;
    let thumb = image::load_from_memory(&thumb.bytes).expect("thumbnail");
    assert_eq!((thumb.width(), thumb.height()), (128, 320));

    // Ranges and HEAD, from the file.
    let part = fetch(app.req(Method::GET, &url).header("range", "bytes=0-9")).await;
    assert_eq!(part.status, 206);
    assert_eq!(part.bytes, full.bytes[..10]);
    assert_eq!(part.header("content-range"), Some(format!("bytes 0-9/{}", full.bytes.len()).as_str()));
    let head = fetch(app.req(Method::HEAD, &url)).await;
    assert_eq!(head.status, 200);
    assert!(head.bytes.is_empty());
    assert_eq!(head.header("content-length"), Some(full.bytes.len().to_string().as_str()));

    // The same picture again is the same file.
    let again = upload(app, &alice, "copy.jpg", "image/jpeg", &original).await;
    assert_eq!((again.status, &again.json()["id"]), (201, &pic["id"]));

    // A PNG named .jpg is taken by its content; lies and broken files not.
    let png = encode(photo(64, 48, 2), ImageFormat::Png);
    let res = upload(app, &alice, "screenshot.jpg", "image/jpeg", &png).await;
    assert_eq!(res.status, 201, "{:?}", res.json());
    let html = b"<!DOCTYPE html><html><body><script>alert(document.cookie)</script></body></html>";
    let s = upload(app, &alice, "cat.png", "image/png", html).await;
    assert_error("HTML named .png", s.status, &s.json(), 415, "unsupported_media_type");
    let svg = br#"<?xml version="1.0"?><svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>"#;
    let s = upload(app, &alice, "logo.svg", "image/svg+xml", svg).await;
    assert_error("SVG", s.status, &s.json(), 415, "unsupported_media_type");
    let jpeg = encode(photo(400, 300, 3), ImageFormat::Jpeg);
    let s = upload(app, &alice, "cut.jpg", "image/jpeg", &jpeg[..jpeg.len() / 2]).await;
    assert_error("truncated JPEG", s.status, &s.json(), 422, "undecodable_image");
    let mut corrupt = encode(photo(40, 30, 4), ImageFormat::Png);
    let middle = corrupt.len() / 2;
    corrupt[middle..middle + 16].fill(0xAB);
    let s = upload(app, &alice, "corrupt.png", "image/png", &corrupt).await;
    assert_error("corrupt PNG", s.status, &s.json(), 422, "undecodable_image");
    let s = upload(app, &alice, "bomb.png", "image/png", &png_bomb()).await;
    assert_error("a decompression bomb", s.status, &s.json(), 413, "too_many_pixels");

    // Not a form, no file, no token.
    let (s, body) = app.post("/api/v1/media", Some(&alice), json!({"file": "x"})).await;
    assert_error("JSON", s, &body, 415, "unsupported_media_type");
    let empty = format!("--{BOUNDARY}--\r\n");
    let req = app
        .req(Method::POST, "/api/v1/media")
        .bearer_auth(&alice)
        .header("content-type", format!("multipart/form-data; boundary={BOUNDARY}"))
        .body(empty);
    let s = fetch(req).await;
    assert_error("no file field", s.status, &s.json(), 400, "missing_file");
    let s = fetch(app.req(Method::POST, "/api/v1/media").body(form("a.png", "image/png", &png))).await;
    assert_error("no token", s.status, &s.json(), 401, "unauthorized");

    // Names that are not a picture's, and a picture that is not there.
    for path in ["/media/..%2Fpith.db", "/media/nothing.jpg", &url.replace(".jpg", ".png")] {
        let r = fetch(app.req(Method::GET, path)).await;
        assert_eq!(r.status, 404, "{path}");
    }

    // The administrators see what is stored.
    let (s, usage) = app.send(Method::GET, "/api/v1/admin/media", Some(&app.admin_token), None).await;
    assert_eq!(s, 200, "{usage}");
    assert_eq!(usage["stored"]["files"], 2);
    assert_eq!(app.send(Method::GET, "/api/v1/admin/media", Some(&alice), None).await.0, 403);
}

async fn showing_story<S: Store>(app: &TestApp<S>) {
    app.community("photos").await;
    let bob = app.user("bob").await;
    let carol = app.user("carol").await;
    let pic = upload(app, &bob, "a.jpg", "image/jpeg", &encode(photo(640, 480, 5), ImageFormat::Jpeg)).await.json();
    let url = pic["url"].as_str().expect("url").to_owned();
    let topic = app.topic("photos", &bob, "My desk").await;

    // Markdown shows it with its size, linked to itself; another host's
    // picture stays a link.
    let body = format!("![my desk]({url}) and ![theirs](https://elsewhere.example/x.png)");
    let mine = app.reply(topic, &bob, None, &body).await;
    let (_, t) = app.get(&format!("/api/v1/topics/{topic}?html=true")).await;
    let html = t["posts"].as_array().expect("posts").iter().find(|p| p["id"] == mine).expect("post")["body_html"]
        .as_str()
        .expect("html")
        .to_owned();
    assert!(
        html.contains(&format!(
            "<a href=\"{url}\" rel=\"nofollow ugc noopener\"><img src=\"{url}\" alt=\"my desk\" width=\"640\" \
             height=\"480\" loading=\"lazy\"></a>"
        )),
        "{html}"
    );
    assert!(html.contains("<a href=\"https://elsewhere.example/x.png\""), "{html}");
    assert!(!html.contains("<img src=\"https://"), "{html}");

    // Shown twice: deleting one post keeps it; deleting the other removes it.
    let quoted = app.reply(topic, &carol, None, &format!("nice! ![]({url})")).await;
    assert_eq!(app.delete(&format!("/api/v1/posts/{mine}"), Some(&bob)).await.0, 204);
    assert_eq!(fetch(app.req(Method::GET, &url)).await.status, 200);
    assert_eq!(app.delete(&format!("/api/v1/posts/{quoted}"), Some(&carol)).await.0, 204);
    assert_eq!(fetch(app.req(Method::GET, &url)).await.status, 404, "removed with the last post showing it");
    assert!(!file_of(app, &url).exists());
    assert!(!file_of(app, pic["thumbnail_url"].as_str().expect("thumb")).exists());

    // A topic's picture goes with the topic.
    let pic = upload(app, &bob, "b.jpg", "image/jpeg", &encode(photo(300, 200, 6), ImageFormat::Jpeg)).await.json();
    let url = pic["url"].as_str().expect("url").to_owned();
    let (s, t) = app
        .post("/api/v1/communities/photos/topics", Some(&bob), json!({"title": "Shelf", "body": format!("![]({url})")}))
        .await;
    assert_eq!(s, 201, "{t}");
    assert_eq!(app.delete(&format!("/api/v1/topics/{}", t["id"]), Some(&bob)).await.0, 204);
    assert_eq!(fetch(app.req(Method::GET, &url)).await.status, 404);

    // An account's deletion removes its pictures nothing else shows.
    let dave = app.user("dave").await;
    let kept = upload(app, &dave, "k.jpg", "image/jpeg", &encode(photo(200, 200, 7), ImageFormat::Jpeg)).await.json();
    let lone = upload(app, &dave, "l.jpg", "image/jpeg", &encode(photo(200, 201, 8), ImageFormat::Jpeg)).await.json();
    let (kept, lone) = (kept["url"].as_str().expect("url").to_owned(), lone["url"].as_str().expect("url").to_owned());
    app.reply(topic, &carol, None, &format!("dave's: ![]({kept})")).await;
    let (s, body) = app
        .send(Method::DELETE, "/api/v1/admin/users/dave", Some(&app.admin_token), Some(json!({"content": "remove"})))
        .await;
    assert_eq!(s, 204, "{body}");
    assert_eq!(fetch(app.req(Method::GET, &kept)).await.status, 200, "carol's post still shows it");
    assert_eq!(fetch(app.req(Method::GET, &lone)).await.status, 404);

    // A moderator's removal: the picture stops being served.
    let spam = upload(app, &carol, "x.jpg", "image/jpeg", &encode(photo(120, 80, 9), ImageFormat::Jpeg)).await.json();
    let spam = spam["url"].as_str().expect("url").to_owned();
    let post = app.reply(topic, &carol, None, &format!("buy now ![]({spam})")).await;
    assert_eq!(fetch(app.req(Method::GET, &spam)).await.status, 200);
    let (s, body) = app.post(&format!("/api/v1/posts/{post}/remove"), Some(&app.admin_token), json!({})).await;
    assert_eq!(s, 204, "{body}");
    assert_eq!(fetch(app.req(Method::GET, &spam)).await.status, 404, "removed with the post");
    assert!(!file_of(app, &spam).exists());
}

#[tokio::test]
async fn pictures_are_stored_upright_small_and_bare_and_bad_ones_refused() {
    let app = spawn_app().await;
    uploading_story(&app).await;
    app.stop().await;
}

#[tokio::test]
async fn pictures_on_postgres() {
    let db = TestDb::create().await;
    let app = spawn_pg_app(&db).await;
    uploading_story(&app).await;
    app.stop().await;
}

#[tokio::test]
async fn pictures_show_in_markdown_and_go_with_what_showed_them() {
    let app = spawn_app().await;
    showing_story(&app).await;
    app.stop().await;
}

#[tokio::test]
async fn pictures_show_and_go_on_postgres() {
    let db = TestDb::create().await;
    let app = spawn_pg_app(&db).await;
    showing_story(&app).await;
    app.stop().await;
}

/// A noisy 1100x1100 photo: about 0.55 MiB stored, so two break 1 MiB.
fn big(seed: u32) -> Vec<u8> {
    encode(photo(1100, 1100, seed), ImageFormat::Jpeg)
}

async fn quota_story<S: Store>(user: &TestApp<S>, total: &TestApp<S>) {
    let erin = user.user("erin").await;
    let first = upload(user, &erin, "1.jpg", "image/jpeg", &big(10)).await;
    assert_eq!(first.status, 201, "{:?}", first.json());
    assert!(first.json()["bytes"].as_i64().expect("bytes") > 1 << 19, "{:?}", first.json());
    let s = upload(user, &erin, "2.jpg", "image/jpeg", &big(11)).await;
    assert_error("over the user's quota", s.status, &s.json(), 413, "quota_exceeded");
    let again = upload(user, &erin, "1.jpg", "image/jpeg", &big(10)).await;
    assert_eq!(again.status, 201, "a picture already stored costs nothing");
    let frank = user.user("frank").await;
    assert_eq!(upload(user, &frank, "3.jpg", "image/jpeg", &big(12)).await.status, 201, "quotas are per account");

    let (gina, hal) = (total.user("gina").await, total.user("hal").await);
    assert_eq!(upload(total, &gina, "1.jpg", "image/jpeg", &big(20)).await.status, 201);
    let s = upload(total, &hal, "2.jpg", "image/jpeg", &big(21)).await;
    assert_error("over the site's quota", s.status, &s.json(), 507, "storage_full");
    assert!(s.json()["error"]["message"].as_str().is_some_and(|m| m.contains("--media-quota-total-mb")));
    // The refused picture's files are not left behind.
    let files = walk(&total.dir.path().join("media"));
    assert_eq!(files, 2, "one picture and its thumbnail");
}

/// Uploads racing each other into the store, each within the quotas
/// alone: as many are recorded as fit and the rest refused, whatever the
/// order (on PostgreSQL, READ COMMITTED would let each read the sums
/// without the others' pictures; SQLite's one writer orders them).
async fn racing_uploads_story<S: Store>(app: &TestApp<S>) {
    use pith::model::media::{Media, MediaQuota, Recorded};
    const EACH: i64 = 300_000;
    let store = &app.state.store;
    let mut owners = Vec::new();
    for name in ["racer", "rival1", "rival2", "rival3"] {
        let user = store.create_user(pith::model::Username::parse(name).expect("name"), None, false).await;
        owners.push(user.expect("user").id);
    }
    let picture = |owner: i64, i: u32| Media {
        name: MediaName::of(&i.to_le_bytes(), 100 + i, 100, pith::media::Kind::Jpeg).to_string(),
        owner_id: Some(owner),
        bytes: EACH,
        width: 100 + i,
        height: 100,
        content_type: "image/jpeg".into(),
        created_at: pith::model::Timestamp::now(),
    };
    let race = |pictures: Vec<Media>, quota: MediaQuota| {
        futures_util::future::join_all(pictures.into_iter().map(|m| {
            let state = app.state.clone();
            tokio::spawn(async move { state.store.record_media(m, quota).await.expect("record") })
        }))
    };
    // One account, 1 MB of its own: three of 300 KB fit, the other 21 not.
    let quota = MediaQuota { user_bytes: 1_000_000, total_bytes: 100_000_000 };
    let done = race((0..24).map(|i| picture(owners[0], i)).collect(), quota).await;
    let done: Vec<Recorded> = done.into_iter().map(|r| r.expect("task")).collect();
    let new = done.iter().filter(|r| matches!(r, Recorded::New(_))).count();
    let refused = done.iter().filter(|r| matches!(r, Recorded::OverUserQuota { .. })).count();
    assert_eq!((new, refused), (3, 21), "{done:?}");
    assert_eq!(store.media_usage(Some(owners[0])).await.expect("usage").bytes, 3 * EACH);

    // Three accounts, 1.6 MB for the site: two more of 300 KB fit (900 KB
    // are there), by whichever of them comes first.
    let quota = MediaQuota { user_bytes: 100_000_000, total_bytes: 1_600_000 };
    let rivals = (100..124).map(|i| picture(owners[1 + (i as usize % 3)], i)).collect();
    let done: Vec<Recorded> = race(rivals, quota).await.into_iter().map(|r| r.expect("task")).collect();
    let new = done.iter().filter(|r| matches!(r, Recorded::New(_))).count();
    let refused = done.iter().filter(|r| matches!(r, Recorded::OverTotalQuota { .. })).count();
    assert_eq!((new, refused), (2, 22), "{done:?}");
    assert_eq!(store.media_usage(None).await.expect("usage").bytes, 5 * EACH);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_uploads_stay_within_the_quotas() {
    let app = spawn_app().await;
    racing_uploads_story(&app).await;
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_uploads_stay_within_the_quotas_on_postgres() {
    let db = TestDb::create().await;
    let app = spawn_pg_app(&db).await;
    racing_uploads_story(&app).await;
    app.stop().await;
}

fn walk(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir)
        .map(|d| d.flatten().map(|e| if e.path().is_dir() { walk(&e.path()) } else { 1 }).sum())
        .unwrap_or(0)
}

fn quotas(user_mb: u64, total_mb: u64) -> MediaConfig {
    MediaConfig { media_quota_user_mb: user_mb, media_quota_total_mb: total_mb, ..MediaConfig::default() }
}

#[tokio::test]
async fn each_quota_refuses_with_its_own_status() {
    let off = RateConfig::off();
    let user = spawn_app_media(tempfile::tempdir().expect("dir"), &off, &quotas(1, 0)).await;
    let total = spawn_app_media(tempfile::tempdir().expect("dir"), &off, &quotas(0, 1)).await;
    quota_story(&user, &total).await;
    user.stop().await;
    total.stop().await;
}

#[tokio::test]
async fn each_quota_on_postgres() {
    let (db1, db2) = (TestDb::create().await, TestDb::create().await);
    let off = RateConfig::off();
    let user = spawn_pg_app_media(&db1, &off, &quotas(1, 0)).await;
    let total = spawn_pg_app_media(&db2, &off, &quotas(0, 1)).await;
    quota_story(&user, &total).await;
    user.stop().await;
    total.stop().await;
}

#[tokio::test]
async fn the_byte_limit_and_the_rate_limit_refuse_uploads() {
    let rate = RateConfig { upload_user: Rate::parse("2/1h").expect("rate"), ..RateConfig::off() };
    let rate = RateConfig { enabled: true, ..rate };
    let small = MediaConfig { media_max_bytes: 100_000, ..MediaConfig::default() };
    let app = spawn_app_media(tempfile::tempdir().expect("dir"), &rate, &small).await;
    let ivy = app.user("ivy").await;
    let s = upload(&app, &ivy, "big.jpg", "image/jpeg", &big(30)).await;
    assert_error("over --media-max-bytes", s.status, &s.json(), 413, "payload_too_large");
    let small = encode(photo(50, 50, 31), ImageFormat::Jpeg);
    assert_eq!(upload(&app, &ivy, "a.jpg", "image/jpeg", &small).await.status, 201);
    let s = upload(&app, &ivy, "b.jpg", "image/jpeg", &small).await;
    assert_error("third upload", s.status, &s.json(), 429, "rate_limited");
    app.stop().await;
}

async fn gc_story<S: Store>(app: &TestApp<S>) {
    use pith::app::media_gc::{GcOptions, gc};
    use pith::media::files::MediaDir;
    app.community("cleanup").await;
    let jay = app.user("jay").await;
    let unused = upload(app, &jay, "u.jpg", "image/jpeg", &encode(photo(90, 60, 40), ImageFormat::Jpeg)).await.json();
    let shown = upload(app, &jay, "s.jpg", "image/jpeg", &encode(photo(60, 90, 41), ImageFormat::Jpeg)).await.json();
    let shown_url = shown["url"].as_str().expect("url").to_owned();
    let topic = app.topic("cleanup", &jay, "Pictures").await;
    app.reply(topic, &jay, None, &format!("![]({shown_url})")).await;
    // A lost file, a file with no row, a crash's temporary file, and an
    // old picture no body shows.
    std::fs::remove_file(file_of(app, &shown_url)).expect("lose a file");
    let dir = MediaDir::new(app.dir.path().join("media"));
    let orphan = MediaName::parse(&format!("{}-5x5.png", "cd".repeat(16))).expect("name");
    dir.write(&orphan, b"no row names me").expect("orphan");
    let temp = dir.path(&orphan).with_file_name(".tmp-1-2-crashed");
    std::fs::write(&temp, b"half").expect("temp");
    let old = MediaName::parse(&format!("{}-7x7.png", "ef".repeat(16))).expect("name");
    dir.write(&old, b"old").expect("old");
    let row = pith::model::media::Media {
        name: old.to_string(),
        owner_id: None,
        bytes: 3,
        width: 7,
        height: 7,
        content_type: "image/png".into(),
        created_at: pith::model::Timestamp(1_000_000),
    };
    app.state.store.record_media(row, Default::default()).await.expect("old row");

    let opts = GcOptions { grace: std::time::Duration::ZERO, unreferenced_days: Some(30), dry_run: true };
    let seen = gc(&app.state.store, &dir, opts).await.expect("dry run");
    assert_eq!(seen.orphan_files, [dir.path(&orphan)]);
    assert_eq!(seen.stale_temp, std::slice::from_ref(&temp));
    assert_eq!(seen.missing, [shown["id"].as_str().expect("id")]);
    assert_eq!(seen.unreferenced, [old.to_string()], "`unused` is new, so it stays");
    assert!(dir.exists(&orphan) && temp.exists(), "a dry run changes nothing");

    let done = gc(&app.state.store, &dir, GcOptions { dry_run: false, ..opts }).await.expect("gc");
    assert_eq!((done.orphan_files.len(), done.missing.len(), done.unreferenced.len()), (1, 1, 1));
    assert!(!dir.exists(&orphan) && !temp.exists() && !dir.exists(&old));
    let usage = app.state.store.media_usage(None).await.expect("usage");
    assert_eq!(usage.files, 1, "only `unused` is left");
    assert_eq!(fetch(app.req(Method::GET, unused["url"].as_str().expect("url"))).await.status, 200);
    let again = gc(&app.state.store, &dir, GcOptions { dry_run: false, ..opts }).await.expect("gc again");
    assert!(again.orphan_files.is_empty() && again.missing.is_empty() && again.unreferenced.is_empty());
}

#[tokio::test]
async fn media_gc_finds_orphans_and_missing_files() {
    let app = spawn_app().await;
    gc_story(&app).await;
    app.stop().await;
}

#[tokio::test]
async fn media_gc_on_postgres() {
    let db = TestDb::create().await;
    let app = spawn_pg_app(&db).await;
    gc_story(&app).await;
    app.stop().await;
}

#[tokio::test]
async fn backup_and_restore_carry_the_pictures() {
    let app = spawn_app().await;
    let kim = app.user("kim").await;
    let pic = upload(&app, &kim, "k.png", "image/png", &encode(photo(30, 20, 50), ImageFormat::Png)).await.json();
    let url = pic["url"].as_str().expect("url").to_owned();
    let dir = app.stop().await;
    let data = dir.path().to_str().expect("utf-8").to_owned();
    let root = tempfile::tempdir().expect("tempdir");
    let file = root.path().join("forum.backup");
    let file_arg = file.to_str().expect("utf-8");
    let run = |args: Vec<String>| async move {
        let args: Vec<&std::ffi::OsStr> = args.iter().map(std::ffi::OsStr::new).collect();
        let out = crate::support::child::run_pith(&args).await;
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    };
    run(vec!["backup".into(), file_arg.into(), "--data-dir".into(), data.clone()]).await;
    let copied = walk(&root.path().join("forum.backup.media"));
    assert_eq!(copied, 2, "the picture and its thumbnail");
    std::fs::remove_dir_all(dir.path().join("media")).expect("lose the pictures");
    run(vec!["restore".into(), file_arg.into(), "--data-dir".into(), data]).await;
    let app = crate::support::helpers::spawn_app_in(dir).await;
    let res = fetch(app.req(Method::GET, &url)).await;
    assert_eq!(res.status, 200, "the picture is back");
    app.stop().await;
}

#[tokio::test]
async fn bench_upload_reports_uploads_memory_and_bytes_saved() {
    let app = spawn_app().await;
    let token = app.user("bench").await;
    let token_arg = format!("--token={token}");
    let pid = std::process::id().to_string();
    let args = [
        "bench",
        "upload",
        "--url",
        &app.addr,
        // One argument with `=`: a token may begin with `-`, which clap
        // would take for a flag if it came on its own.
        &token_arg,
        "-n",
        "3",
        "-c",
        "2",
        "--width",
        "400",
        "--height",
        "300",
        "--server-pid",
        &pid,
    ];
    let args: Vec<&std::ffi::OsStr> = args.iter().map(std::ffi::OsStr::new).collect();
    let out = crate::support::child::run_pith(&args).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    for want in ["3 uploads, 2 at once", "0 failed", "server RSS:", "% saved"] {
        assert!(stdout.contains(want), "{want:?} in {stdout}");
    }
    app.stop().await;
}

#[tokio::test]
async fn pith_media_gc_reports_and_fixes_from_the_command_line() {
    let app = spawn_app().await;
    let lee = app.user("lee").await;
    let pic = upload(&app, &lee, "l.png", "image/png", &encode(photo(30, 30, 60), ImageFormat::Png)).await.json();
    std::fs::remove_file(file_of(&app, pic["url"].as_str().expect("url"))).expect("lose the file");
    let dir = app.stop().await;
    let data = dir.path().to_str().expect("utf-8");
    let gc = |extra: &'static [&'static str]| {
        let mut args = vec!["media", "gc", "--data-dir", data];
        args.extend_from_slice(extra);
        let args: Vec<std::ffi::OsString> = args.into_iter().map(Into::into).collect();
        async move {
            let args: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
            let out = crate::support::child::run_pith(&args).await;
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            String::from_utf8_lossy(&out.stdout).into_owned()
        }
    };
    let dry = gc(&["--dry-run"]).await;
    assert!(dry.contains("rows whose file is missing (would forget): 1"), "{dry}");
    let fixed = gc(&[]).await;
    assert!(fixed.contains("rows whose file is missing (did forget): 1"), "{fixed}");
    let again = gc(&[]).await;
    assert!(again.contains("rows whose file is missing (did forget): 0"), "{again}");
}
