//! `pith bench hello`: a hello-world server on Pith's own stack (axum on a
//! multi-thread tokio runtime, TCP_NODELAY, keep-alive). Every path and
//! method gets the same small JSON body, so the load generator can aim its
//! usual mix at it. What it serves per second on a box is the ceiling for
//! Pith on that box, measured in the same run.

use std::future::Future;
use std::net::SocketAddr;

use anyhow::Context;
use axum::Router;
use axum::body::Bytes;
use axum::http::header;
use clap::Args;
use tokio::net::TcpListener;

/// The body every request gets.
pub const BODY: &str = r#"{"hello":"world"}"#;

#[derive(Debug, Clone, Args)]
pub struct HelloArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8081")]
    pub listen: SocketAddr,

    /// Runtime worker threads (default: one per core, as `pith serve`).
    #[arg(long)]
    pub threads: Option<usize>,

    /// Answer a JSON body of this many bytes instead of the 17-byte one:
    /// e.g. a realistic topic's size (~9,300), to see what serving that
    /// many bytes costs without anything else Pith does.
    #[arg(long, value_parser = clap::value_parser!(u32).range(17..=16_000_000))]
    pub body_bytes: Option<u32>,
}

pub fn main(args: HelloArgs) -> anyhow::Result<()> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = args.threads {
        builder.worker_threads(n.max(1));
    }
    builder.enable_all().build()?.block_on(async {
        let listener =
            TcpListener::bind(args.listen).await.with_context(|| format!("cannot listen on {}", args.listen))?;
        tracing::info!(addr = %listener.local_addr()?, "hello-world server ready");
        let body = args.body_bytes.map_or(Bytes::from_static(BODY.as_bytes()), |n| padded_body(n as usize));
        run(listener, body, crate::serve::shutdown_signal()).await?;
        Ok(())
    })
}

pub fn router() -> Router {
    router_with_body(Bytes::from_static(BODY.as_bytes()))
}

/// Every request gets `body`.
pub fn router_with_body(body: Bytes) -> Router {
    // Reads the request body (as Pith does for a post) and answers the fixed body.
    Router::new().fallback(move |_req: Bytes| {
        let body = body.clone();
        async move { ([(header::CONTENT_TYPE, "application/json")], body) }
    })
}

/// `{"hello":"world","pad":"xxx..."}`, `n` bytes long.
fn padded_body(n: usize) -> Bytes {
    let mut s = String::from(r#"{"hello":"world","pad":""#);
    let pad = n.saturating_sub(s.len() + 2);
    s.extend(std::iter::repeat_n('x', pad));
    s.push_str("\"}");
    Bytes::from(s)
}

/// Answers every request with `body` until `shutdown` resolves.
pub async fn run(
    listener: TcpListener,
    body: Bytes,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    use axum::serve::ListenerExt;
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(listener, router_with_body(body)).with_graceful_shutdown(shutdown).await
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::http::{Request, StatusCode};
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    use super::*;

    #[tokio::test]
    async fn every_path_and_method_gets_the_hello_body() {
        for (method, path) in [("GET", "/"), ("GET", "/api/v1/topics/17"), ("POST", "/api/v1/topics/17/posts")] {
            let req = Request::builder().method(method).uri(path).body(Body::from("{}")).expect("a request");
            let resp = router().oneshot(req).await.expect("infallible");
            assert_eq!(resp.status(), StatusCode::OK);
            assert_eq!(resp.headers()[header::CONTENT_TYPE], "application/json");
            let body = resp.into_body().collect().await.expect("a body").to_bytes();
            assert_eq!(body, BODY.as_bytes());
        }
    }

    #[test]
    fn a_padded_body_is_json_of_the_asked_size() {
        for n in [17, 40, 9_300] {
            let body = padded_body(n);
            assert_eq!(body.len(), n.max(26), "{n}");
            let json: serde_json::Value = serde_json::from_slice(&body).expect("json");
            assert_eq!(json["hello"], "world");
        }
    }
}
