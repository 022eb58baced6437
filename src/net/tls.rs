//! TLS 1.3 termination with rustls (ring provider), whose handshake
//! `crate::tls13` runs: the certificate and key
//! from PEM files, ALPN `h2` and `http/1.1`, and a certificate resolver that
//! is swapped atomically on SIGHUP. A reload only affects new handshakes, so
//! open connections keep going; a bad new certificate or key is logged and
//! the old one stays in use.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use anyhow::Context;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::crypto::CryptoProvider;
use tokio_rustls::rustls::server::{ClientHello, ResolvesServerCert};
use tokio_rustls::rustls::sign::CertifiedKey;
use tokio_rustls::rustls::{ServerConfig, version};

/// The PEM files named by `--tls-cert` and `--tls-key`.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    /// Certificate chain, leaf first (as certbot's `fullchain.pem`).
    pub cert: PathBuf,
    /// Private key: PKCS#8, PKCS#1 (RSA) or SEC1 (EC).
    pub key: PathBuf,
}

/// What the accept loop needs to terminate TLS (`crate::tls13::accept`);
/// cheap to clone.
#[derive(Clone)]
pub struct Tls {
    pub config: Arc<ServerConfig>,
    pub certs: Arc<ReloadableCert>,
}

impl fmt::Debug for Tls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tls").field("files", &self.certs.files).finish()
    }
}

impl Tls {
    /// Loads the files (an error names the bad one) and builds a TLS 1.3
    /// server configuration offering HTTP/2 and HTTP/1.1.
    pub fn new(files: TlsFiles) -> anyhow::Result<Tls> {
        let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
        let certs = Arc::new(ReloadableCert::load(files, provider.clone())?);
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&version::TLS13])
            .context("TLS 1.3 is not available")?
            .with_no_client_auth()
            .with_cert_resolver(certs.clone());
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        // Every connection's keys leave rustls after its handshake
        // (`crate::tls13`).
        config.enable_secret_extraction = true;
        Ok(Tls { config: Arc::new(config), certs })
    }

    /// Reloads the certificate on every SIGHUP until the process ends.
    pub fn reload_on_sighup(&self) -> std::io::Result<()> {
        let mut hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())?;
        let certs = self.certs.clone();
        tokio::spawn(async move {
            while hup.recv().await.is_some() {
                certs.reload();
            }
        });
        Ok(())
    }
}

/// The certificate in use, replaced whole on reload. `RwLock` rather than a
/// lock-free swap: it is held only to clone an `Arc`, once per handshake.
pub struct ReloadableCert {
    files: TlsFiles,
    provider: Arc<CryptoProvider>,
    current: RwLock<Arc<CertifiedKey>>,
}

impl fmt::Debug for ReloadableCert {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReloadableCert").field("files", &self.files).finish()
    }
}

impl ReloadableCert {
    fn load(files: TlsFiles, provider: Arc<CryptoProvider>) -> anyhow::Result<ReloadableCert> {
        let key = load_pair(&files, &provider)?;
        Ok(ReloadableCert { files, provider, current: RwLock::new(Arc::new(key)) })
    }

    /// Reads the files again; keeps the old certificate if they are bad.
    pub fn reload(&self) {
        match load_pair(&self.files, &self.provider) {
            Ok(key) => {
                *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(key);
                tracing::info!(cert = %self.files.cert.display(), "TLS certificate reloaded");
            }
            Err(e) => {
                tracing::error!(error = %format!("{e:#}"), "TLS certificate not reloaded; the previous one stays in use");
            }
        }
    }
}

impl ResolvesServerCert for ReloadableCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.read().unwrap_or_else(|e| e.into_inner()).clone())
    }
}

/// The chain and key, checked to belong together.
fn load_pair(files: &TlsFiles, provider: &CryptoProvider) -> anyhow::Result<CertifiedKey> {
    let certs = load_certs(&files.cert)?;
    let key = PrivateKeyDer::from_pem_file(&files.key)
        .with_context(|| format!("cannot read a PEM private key from {}", files.key.display()))?;
    CertifiedKey::from_der(certs, key, provider).with_context(|| {
        format!("the key {} does not fit the certificate {}", files.key.display(), files.cert.display())
    })
}

fn load_certs(path: &Path) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|iter| iter.collect::<Result<Vec<_>, _>>())
        .with_context(|| format!("cannot read PEM certificates from {}", path.display()))?;
    if certs.is_empty() {
        anyhow::bail!("no certificate in {}", path.display());
    }
    Ok(certs)
}
