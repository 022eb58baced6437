//! A tiny HTTP/1.1 client for the benchmark's few API calls (register,
//! find a community, create a topic, the timed POST): one request per
//! connection, `Connection: close`, the body read to EOF.

use std::net::SocketAddr;

use anyhow::{Context, bail};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Where the server is: `http://host:port` split up.
#[derive(Debug, Clone)]
pub struct Target {
    pub addr: SocketAddr,
    pub host: String,
}

impl Target {
    pub fn parse(url: &str) -> anyhow::Result<Target> {
        let rest = url.strip_prefix("http://").context("--url must start with http:// (TLS is not supported)")?;
        let host = rest.split('/').next().unwrap_or(rest).to_owned();
        let with_port = if host.contains(':') { host.clone() } else { format!("{host}:80") };
        let addr = std::net::ToSocketAddrs::to_socket_addrs(&with_port)
            .with_context(|| format!("cannot resolve {with_port}"))?
            .next()
            .with_context(|| format!("{with_port} has no address"))?;
        Ok(Target { addr, host })
    }
}

/// Sends one request; returns the status and the JSON body (Null when the
/// body is not JSON).
pub async fn request(
    target: &Target,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<&Value>,
) -> anyhow::Result<(u16, Value)> {
    let mut tcp =
        TcpStream::connect(target.addr).await.with_context(|| format!("cannot connect to {}", target.addr))?;
    let _ = tcp.set_nodelay(true);
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n", target.host);
    if let Some(t) = token {
        req.push_str(&format!("Authorization: Bearer {t}\r\n"));
    }
    if !body.is_empty() {
        req.push_str(&format!("Content-Type: application/json\r\nContent-Length: {}\r\n", body.len()));
    }
    req.push_str("\r\n");
    req.push_str(&body);
    tcp.write_all(req.as_bytes()).await?;
    let mut raw = Vec::new();
    tcp.read_to_end(&mut raw).await?;
    let Some(split) = raw.windows(4).position(|w| w == b"\r\n\r\n") else {
        bail!("{method} {path}: no HTTP response");
    };
    let head = String::from_utf8_lossy(&raw[..split]);
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).context("bad status line")?;
    if head.to_ascii_lowercase().contains("transfer-encoding: chunked") {
        bail!("{method} {path}: chunked responses are not supported here");
    }
    let json = serde_json::from_slice(&raw[split + 4..]).unwrap_or(Value::Null);
    Ok((status, json))
}
