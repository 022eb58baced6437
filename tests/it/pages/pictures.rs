//! The new-topic and comment forms with a picture in them, as a browser
//! without JavaScript sends them (multipart/form-data): the picture is
//! uploaded and linked at the end of the text; a refused one shows on the
//! form with the text kept and nothing posted; the urlencoded forms keep
//! their body limit. The script's own upload is in tests/browser.

use std::io::Cursor;

use image::{ImageFormat, Rgb, RgbImage};
use pith::app::limits::RateConfig;
use pith::app::media::MediaConfig;
use reqwest::Method;

use super::{Browser, csrf_of, forum, text};
use crate::support::helpers::{TestApp, spawn_app_media};

const BOUNDARY: &str = "pith-form-boundary-31c9";

/// A multipart/form-data body: the text `fields`, then `file` when given
/// as (file name, content type, bytes); an empty one as a browser sends a
/// file input left empty.
fn multipart(fields: &[(&str, &str)], file: Option<(&str, &str, &[u8])>) -> Vec<u8> {
    let mut body = Vec::new();
    for (name, value) in fields {
        body.extend_from_slice(
            format!("--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n").as_bytes(),
        );
    }
    let (file_name, content_type, bytes) = file.unwrap_or(("", "application/octet-stream", b""));
    body.extend_from_slice(
        format!(
            "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{file_name}\"\r\n\
             Content-Type: {content_type}\r\n\r\n"
        )
        .as_bytes(),
    );
    body.extend_from_slice(bytes);
    body.extend_from_slice(format!("\r\n--{BOUNDARY}--\r\n").as_bytes());
    body
}

impl Browser<'_> {
    /// Posts `action` as multipart/form-data with the CSRF token of `page`.
    async fn submit_multipart(
        &mut self,
        page: &str,
        action: &str,
        fields: &[(&str, &str)],
        file: Option<(&str, &str, &[u8])>,
    ) -> crate::support::helpers::Reply {
        let csrf = csrf_of(&text(&self.get(page).await));
        let mut all = vec![("csrf", csrf.as_str())];
        all.extend_from_slice(fields);
        let req = self
            .request(Method::POST, action)
            .header("content-type", format!("multipart/form-data; boundary={BOUNDARY}"))
            .body(multipart(&all, file));
        self.send(req).await
    }
}

fn png(w: u32, h: u32) -> Vec<u8> {
    let img = RgbImage::from_fn(w, h, |x, y| Rgb([(x % 256) as u8, (y % 256) as u8, 90]));
    let mut out = Cursor::new(Vec::new());
    img.write_to(&mut out, ImageFormat::Png).expect("png");
    out.into_inner()
}

async fn app() -> TestApp {
    let media = MediaConfig { media_max_bytes: 64 * 1024, ..MediaConfig::default() };
    spawn_app_media(tempfile::tempdir().expect("tempdir"), &RateConfig::off(), &media).await
}

/// The body of the newest post of `topic`, as the API gives it.
async fn last_post_body(app: &TestApp, topic: i64) -> String {
    let json = app.read_topic(topic, "new").await;
    json["posts"][0]["body"].as_str().expect("a post").to_owned()
}

#[tokio::test]
async fn a_comment_form_with_a_picture_links_it_and_a_refused_one_keeps_the_text() {
    let app = app().await;
    let topic = forum(&app).await;
    let mut b = Browser::new(&app);
    b.cookies.insert("pith_session".into(), app.user("pat").await);
    let page = format!("/t/{topic}");
    let action = format!("/t/{topic}/reply");
    assert!(text(&b.get(&page).await).contains("enctype=\"multipart/form-data\""), "the form can carry a file");

    let r = b
        .submit_multipart(
            &page,
            &action,
            &[("body", "My desk"), ("parent", "")],
            Some(("my_desk.png", "image/png", &png(40, 30))),
        )
        .await;
    assert_eq!(r.status, 303, "{}", text(&r));
    let body = last_post_body(&app, topic).await;
    let (text_part, image) = body.split_once("\n\n").expect("the picture in its own paragraph");
    assert_eq!(text_part, "My desk");
    // Many colours: stored as JPEG whatever it came as.
    assert!(image.starts_with("![my desk](/media/") && image.ends_with("-40x30.jpg)"), "{image}");
    let url = image.trim_start_matches("![my desk](").trim_end_matches(')');
    assert_eq!(app.get(url).await.0, 200, "the linked picture is served");

    // A file input left empty: the comment alone.
    let r = b.submit_multipart(&page, &action, &[("body", "Just words"), ("parent", "")], None).await;
    assert_eq!(r.status, 303, "{}", text(&r));
    assert_eq!(last_post_body(&app, topic).await, "Just words");

    // Refused pictures: on the reply page, the text kept, nothing posted.
    let svg: &[u8] = b"<svg xmlns=\"http://www.w3.org/2000/svg\"/>";
    let big = vec![0xFFu8; 70 * 1024];
    for (name, kind, bytes, status, says) in [
        ("logo.svg", "image/svg+xml", svg, 415, "not a picture pith takes"),
        ("huge.jpg", "image/jpeg", &big[..], 413, "the picture is larger than 64 kb"),
    ] {
        let fields = [("body", "Keep this text"), ("parent", "")];
        let r = b.submit_multipart(&page, &action, &fields, Some((name, kind, bytes))).await;
        let html = text(&r);
        assert_eq!(r.status, status, "{name}: {html}");
        assert!(html.to_lowercase().contains(says), "{name}: {html}");
        assert!(html.contains(">Keep this text</textarea>"), "{name}: the text is kept: {html}");
        assert_eq!(last_post_body(&app, topic).await, "Just words", "{name}: nothing posted");
    }
    app.stop().await;
}

#[tokio::test]
async fn a_new_topic_may_be_only_a_picture_and_urlencoded_forms_keep_their_limit() {
    let app = app().await;
    app.community("pics").await;
    let mut b = Browser::new(&app);
    b.cookies.insert("pith_session".into(), app.user("quinn").await);
    let fields = [("community", "pics"), ("title", "My Pi"), ("url", ""), ("body", "")];
    let r = b.submit_multipart("/submit", "/submit", &fields, Some(("pi.png", "image/png", &png(64, 48)))).await;
    assert_eq!(r.status, 303, "{}", text(&r));
    let id: i64 = r.header("location").and_then(|l| l.strip_prefix("/t/")).and_then(|l| l.parse().ok()).expect("topic");
    let json = app.read_topic(id, "new").await;
    let body = json["topic"]["body"].as_str().expect("body");
    assert!(body.starts_with("![pi](/media/") && body.ends_with("-64x48.jpg)"), "{body}");
    let html = text(&b.get(&format!("/t/{id}")).await);
    assert!(html.contains("width=\"64\" height=\"48\"") && html.contains("loading=\"lazy\""), "{html}");

    // Lifting the router's limit for the picture did not lift it for
    // urlencoded forms.
    let huge = "x".repeat(3 << 20);
    let r = b.submit("/submit", "/submit", &[("community", "pics"), ("title", "Huge"), ("body", &huge)]).await;
    assert_eq!(r.status, 413, "{}", text(&r));
    app.stop().await;
}
