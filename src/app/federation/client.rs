//! Outbound HTTP to other servers: fetching actors (signed GETs) and
//! delivering activities (signed POSTs). Every request is bounded in time
//! (`Limits::timeout`, connect to last byte) and in the size of the
//! answer read; redirects are not followed (an actor or inbox that moved
//! is fetched again at its new id by whoever names it). The host is
//! resolved here and every address it resolves to is checked before one
//! is connected to, so a name cannot point the server at the local
//! network, loopback or link-local addresses, unless `allow_private`
//! (tests on loopback) says so; plain http is refused likewise.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::Request;
use hyper::header::{HeaderName, HeaderValue};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_rustls::rustls;

/// The Accept of a fetch: ActivityPub's two media types.
pub const AP_ACCEPT: &str =
    "application/activity+json, application/ld+json; profile=\"https://www.w3.org/ns/activitystreams\"";

/// What bounds every request.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub timeout: Duration,
    /// Bytes of an answer read at most; a longer one fails.
    pub max_body: usize,
    pub allow_private: bool,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { timeout: super::FETCH_TIMEOUT, max_body: 1 << 20, allow_private: false }
    }
}

/// Why a request failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum FetchError {
    #[error("`{0}` is not an http(s) URL this server may reach")]
    Url(String),
    #[error("{0} resolves only to private, loopback or link-local addresses")]
    Private(String),
    #[error("{0}")]
    Io(String),
    #[error("timed out")]
    Timeout,
    #[error("the answer is over {0} bytes")]
    TooLarge(usize),
    #[error("answered {0}")]
    Status(u16),
    #[error("the answer is not JSON: {0}")]
    Json(String),
}

/// A signer: the key id and the key that sign a request.
#[derive(Debug, Clone)]
pub struct Signer {
    pub key_id: String,
    pub key: Arc<super::keys::SigningKey>,
}

impl Signer {
    /// A signer of the PKCS#8 PEM `private_pem`.
    pub fn new(key_id: String, private_pem: &str) -> Result<Signer, String> {
        Ok(Signer { key_id, key: Arc::new(super::keys::SigningKey::from_pem(private_pem)?) })
    }
}

pub struct Client {
    limits: Limits,
    tls: tokio_rustls::TlsConnector,
}

impl Client {
    pub fn new(limits: Limits) -> Self {
        let roots = rustls::RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() };
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .map(|b| b.with_root_certificates(roots).with_no_client_auth())
            .expect("ring supports the default TLS versions");
        Client { limits, tls: tokio_rustls::TlsConnector::from(Arc::new(config)) }
    }

    /// GETs `url` as ActivityPub JSON, signed by `signer`.
    pub async fn get_json(&self, url: &str, signer: &Signer) -> Result<serde_json::Value, FetchError> {
        let (status, body) = self.request("GET", url, None, signer).await?;
        if !(200..300).contains(&status) {
            return Err(FetchError::Status(status));
        }
        serde_json::from_slice(&body).map_err(|e| FetchError::Json(e.to_string()))
    }

    /// POSTs an activity to an inbox, signed by `signer`; the status.
    pub async fn post(&self, url: &str, body: Vec<u8>, signer: &Signer) -> Result<u16, FetchError> {
        Ok(self.request("POST", url, Some(body), signer).await?.0)
    }

    async fn request(
        &self,
        method: &str,
        url: &str,
        body: Option<Vec<u8>>,
        signer: &Signer,
    ) -> Result<(u16, Bytes), FetchError> {
        tokio::time::timeout(self.limits.timeout, self.request_untimed(method, url, body, signer))
            .await
            .unwrap_or(Err(FetchError::Timeout))
    }

    async fn request_untimed(
        &self,
        method: &str,
        url: &str,
        body: Option<Vec<u8>>,
        signer: &Signer,
    ) -> Result<(u16, Bytes), FetchError> {
        let parsed = url::Url::parse(url).map_err(|_| FetchError::Url(url.to_owned()))?;
        let https = match parsed.scheme() {
            "https" => true,
            "http" if self.limits.allow_private => false,
            _ => return Err(FetchError::Url(url.to_owned())),
        };
        let host = parsed.host_str().filter(|h| !h.is_empty()).ok_or_else(|| FetchError::Url(url.to_owned()))?;
        let port = parsed.port_or_known_default().ok_or_else(|| FetchError::Url(url.to_owned()))?;
        let authority = match parsed.port() {
            Some(p) => format!("{host}:{p}"),
            None => host.to_owned(),
        };
        let path = match parsed.query() {
            Some(q) => format!("{}?{q}", parsed.path()),
            None => parsed.path().to_owned(),
        };
        let addr = self.resolve(host.trim_start_matches('[').trim_end_matches(']'), port).await?;
        let signed = super::signature::sign_request_with(
            &signer.key_id,
            &signer.key,
            method,
            &authority,
            &path,
            body.as_deref(),
        )
        .map_err(FetchError::Io)?;
        let mut req = Request::builder()
            .method(method)
            .uri(&path)
            .header("host", &authority)
            .header("accept", AP_ACCEPT)
            .header("user-agent", concat!("pith/", env!("CARGO_PKG_VERSION")));
        if body.is_some() {
            req = req.header("content-type", "application/activity+json");
        }
        for (name, value) in signed {
            let value = HeaderValue::from_str(&value).map_err(|e| FetchError::Io(e.to_string()))?;
            req = req.header(HeaderName::from_static(name), value);
        }
        let req =
            req.body(Full::new(Bytes::from(body.unwrap_or_default()))).map_err(|e| FetchError::Io(e.to_string()))?;
        let tcp = TcpStream::connect(addr).await.map_err(|e| FetchError::Io(format!("connect {addr}: {e}")))?;
        if https {
            let name = rustls::pki_types::ServerName::try_from(host.to_owned())
                .map_err(|_| FetchError::Url(url.to_owned()))?;
            let tls = self.tls.connect(name, tcp).await.map_err(|e| FetchError::Io(format!("TLS: {e}")))?;
            self.exchange(tls, req).await
        } else {
            self.exchange(tcp, req).await
        }
    }

    async fn exchange<T>(&self, io: T, req: Request<Full<Bytes>>) -> Result<(u16, Bytes), FetchError>
    where
        T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let io_err = |e: hyper::Error| FetchError::Io(e.to_string());
        let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io)).await.map_err(io_err)?;
        let conn = tokio::spawn(conn);
        let res = send.send_request(req).await.map_err(io_err);
        let out = match res {
            Ok(res) => {
                let status = res.status().as_u16();
                match Limited::new(res.into_body(), self.limits.max_body).collect().await {
                    Ok(body) => Ok((status, body.to_bytes())),
                    Err(e) if e.is::<http_body_util::LengthLimitError>() => {
                        Err(FetchError::TooLarge(self.limits.max_body))
                    }
                    Err(e) => Err(FetchError::Io(e.to_string())),
                }
            }
            Err(e) => Err(e),
        };
        conn.abort();
        out
    }

    /// The first address of `host` this client may connect to.
    async fn resolve(&self, host: &str, port: u16) -> Result<SocketAddr, FetchError> {
        let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host, port))
            .await
            .map_err(|e| FetchError::Io(format!("resolve {host}: {e}")))?
            .collect();
        addrs
            .into_iter()
            .find(|a| self.limits.allow_private || is_public(a.ip()))
            .ok_or_else(|| FetchError::Private(host.to_owned()))
    }
}

/// Whether an address is on the public Internet: not loopback, private,
/// link-local, shared (CGNAT), unspecified, broadcast, documentation or
/// unique-local, nor an IPv4-mapped form of one of those.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            !(v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_documentation()
                || v4.is_multicast()
                || o[0] == 0
                || (o[0] == 100 && (o[1] & 0xc0) == 64))
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_public(IpAddr::V4(v4));
            }
            let first = v6.segments()[0];
            !(v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (first & 0xfe00) == 0xfc00
                || (first & 0xffc0) == 0xfe80)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_network_addresses_are_not_public() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
        ] {
            assert!(!is_public(ip.parse().expect("ip")), "{ip}");
        }
        for ip in ["1.1.1.1", "2606:4700::1111"] {
            assert!(is_public(ip.parse().expect("ip")), "{ip}");
        }
    }
}
