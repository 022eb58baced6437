//! The network settings of `pith serve`: time limits, header size, the
//! connection cap, and the TLS files.

use std::path::PathBuf;

use clap::Args;

#[derive(Debug, Clone, Args)]
pub struct NetConfig {
    /// Seconds a request may take before it is answered 408/503.
    #[arg(long, env = "PITH_REQUEST_TIMEOUT", default_value_t = 30)]
    pub request_timeout_secs: u64,

    /// Seconds a client has to send a request's headers; also how long an
    /// idle keep-alive connection is kept (slowloris defence).
    #[arg(long, env = "PITH_HEADER_TIMEOUT", default_value_t = 10)]
    pub header_timeout_secs: u64,

    /// Largest request head (request line plus headers), in KiB.
    #[arg(long, env = "PITH_MAX_HEADER_KB", default_value_t = 16)]
    pub max_header_kb: usize,

    /// Most HTTP connections open at once; more are answered 503 and closed.
    /// Default (`auto`): a quarter of the open-file limit (`ulimit -n`) at
    /// most 10,000, within a quarter of --memory-mb.
    #[arg(long, env = "PITH_MAX_CONNECTIONS", default_value_t = 10_000)]
    pub max_connections: usize,

    /// PEM certificate chain (leaf first): serve HTTPS, TLS 1.3 with HTTP/2
    /// and HTTP/1.1, instead of plain HTTP. Needs --tls-key. Reloaded on SIGHUP.
    #[arg(long, env = "PITH_TLS_CERT")]
    pub tls_cert: Option<PathBuf>,

    /// PEM private key of --tls-cert (PKCS#8, PKCS#1 or SEC1). Reloaded on SIGHUP.
    #[arg(long, env = "PITH_TLS_KEY")]
    pub tls_key: Option<PathBuf>,
}

impl NetConfig {
    /// The TLS files, when both are set; one without the other is an error.
    pub fn tls_files(&self) -> anyhow::Result<Option<super::tls::TlsFiles>> {
        match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => Ok(Some(super::tls::TlsFiles { cert: cert.clone(), key: key.clone() })),
            (None, None) => Ok(None),
            (Some(_), None) => anyhow::bail!(
                "--tls-cert (PITH_TLS_CERT) is set but --tls-key (PITH_TLS_KEY) is not; give both or neither"
            ),
            (None, Some(_)) => anyhow::bail!(
                "--tls-key (PITH_TLS_KEY) is set but --tls-cert (PITH_TLS_CERT) is not; give both or neither"
            ),
        }
    }
}
