//! A tiny HTTP/1.1 client, over TCP or TLS, for the benchmark's few API calls (register,
//! find a community, create a topic, the timed POST): one request per
//! connection, `Connection: close`, the body read to EOF.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, bail};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::{ClientConfig, RootCertStore};

/// A connection to the server: TCP, or TLS over it.
pub trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// Where the server is: `http://host:port` or `https://host:port` split up,
/// with what a TLS client needs.
#[derive(Clone)]
pub struct Target {
    pub addr: SocketAddr,
    pub host: String,
    tls: Option<(TlsConnector, ServerName<'static>)>,
}

impl Target {
    /// `ca`: the PEM certificates an `https://` server's chain must lead
    /// to (its own, when it is self-signed).
    pub fn parse(url: &str, ca: Option<&Path>) -> anyhow::Result<Target> {
        let (rest, tls, port) = match (url.strip_prefix("http://"), url.strip_prefix("https://")) {
            (Some(rest), _) => (rest, false, 80),
            (_, Some(rest)) => (rest, true, 443),
            _ => bail!("--url must start with http:// or https://"),
        };
        let host = rest.split('/').next().unwrap_or(rest).to_owned();
        let with_port = if host.contains(':') { host.clone() } else { format!("{host}:{port}") };
        let addr = std::net::ToSocketAddrs::to_socket_addrs(&with_port)
            .with_context(|| format!("cannot resolve {with_port}"))?
            .next()
            .with_context(|| format!("{with_port} has no address"))?;
        let tls = match (tls, ca) {
            (false, _) => None,
            (true, None) => bail!("an https:// --url needs --tls-ca FILE: the certificate its chain is signed with"),
            (true, Some(ca)) => {
                let mut roots = RootCertStore::empty();
                for cert in
                    CertificateDer::pem_file_iter(ca).with_context(|| format!("cannot read {}", ca.display()))?
                {
                    roots.add(cert.with_context(|| format!("{}: not a PEM certificate", ca.display()))?)?;
                }
                let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
                let mut config = ClientConfig::builder_with_provider(provider)
                    .with_safe_default_protocol_versions()?
                    .with_root_certificates(roots)
                    .with_no_client_auth();
                config.alpn_protocols = vec![b"http/1.1".to_vec()];
                let name = host.rsplit_once(':').map_or(host.as_str(), |(h, _)| h);
                let name = ServerName::try_from(name.trim_matches(['[', ']']).to_owned())
                    .with_context(|| format!("{name} is not a host name for TLS"))?;
                Some((TlsConnector::from(Arc::new(config)), name))
            }
        };
        Ok(Target { addr, host, tls })
    }

    /// The connection over `tcp`, after a TLS handshake for `https://`.
    pub async fn wrap(&self, tcp: TcpStream) -> anyhow::Result<Box<dyn Io>> {
        Ok(match &self.tls {
            None => Box::new(tcp),
            Some((connector, name)) => Box::new(connector.connect(name.clone(), tcp).await.context("TLS handshake")?),
        })
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
    let tcp = TcpStream::connect(target.addr).await.with_context(|| format!("cannot connect to {}", target.addr))?;
    let _ = tcp.set_nodelay(true);
    let mut tcp = target.wrap(tcp).await?;
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
    // A TLS server may end with a reset after its close_notify; what came
    // before it is the answer.
    if let Err(e) = tcp.read_to_end(&mut raw).await
        && raw.is_empty()
    {
        return Err(e.into());
    }
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
