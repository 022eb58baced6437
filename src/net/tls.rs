//! TLS 1.3 termination with rustls (ring provider), whose handshake
//! `crate::tls13` runs: the certificate and key from PEM files, ALPN `h2`
//! and `http/1.1`, the cipher suite this machine runs fastest among those
//! the client takes (`prefers_chacha`), and a certificate resolver that is
//! swapped atomically on SIGHUP. A reload only affects new handshakes, so
//! open connections keep going; a bad new certificate or key is logged and
//! the old one stays in use.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use anyhow::Context;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::crypto::{CryptoProvider, ring};
use tokio_rustls::rustls::server::{ClientHello, ResolvesServerCert};
use tokio_rustls::rustls::sign::CertifiedKey;
use tokio_rustls::rustls::{CipherSuite, ServerConfig, SupportedCipherSuite, version};

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
    /// AES-128-GCM, AES-256-GCM, ChaCha20-Poly1305, in this order.
    aes_first: Arc<ServerConfig>,
    /// ChaCha20-Poly1305, then the AES-GCM suites.
    chacha_first: Arc<ServerConfig>,
    /// Whether this CPU has AES and carry-less multiply instructions.
    aes_hardware: bool,
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
        let certs = Arc::new(ReloadableCert::load(files, Arc::new(ring::default_provider()))?);
        let config = |suites: [SupportedCipherSuite; 3]| -> anyhow::Result<Arc<ServerConfig>> {
            let provider = CryptoProvider { cipher_suites: suites.to_vec(), ..ring::default_provider() };
            let mut config = ServerConfig::builder_with_provider(Arc::new(provider))
                .with_protocol_versions(&[&version::TLS13])
                .context("TLS 1.3 is not available")?
                .with_no_client_auth()
                .with_cert_resolver(certs.clone());
            config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
            // The order above, not the client's: `config_for` has chosen.
            config.ignore_client_order = true;
            // Every connection's keys leave rustls after its handshake
            // (`crate::tls13`).
            config.enable_secret_extraction = true;
            Ok(Arc::new(config))
        };
        use ring::cipher_suite::TLS13_CHACHA20_POLY1305_SHA256 as CHACHA;
        use ring::cipher_suite::{TLS13_AES_128_GCM_SHA256 as AES128, TLS13_AES_256_GCM_SHA384 as AES256};
        Ok(Tls {
            aes_first: config([AES128, AES256, CHACHA])?,
            chacha_first: config([CHACHA, AES128, AES256])?,
            aes_hardware: aes_hardware(),
            certs,
        })
    }

    /// The configuration for a client whose hello offers `hello`'s cipher
    /// suites: ChaCha20-Poly1305 first or AES-GCM first (`prefers_chacha`).
    pub fn config_for(&self, hello: &ClientHello<'_>) -> Arc<ServerConfig> {
        if prefers_chacha(self.aes_hardware, hello.cipher_suites()) {
            self.chacha_first.clone()
        } else {
            self.aes_first.clone()
        }
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

/// Which TLS 1.3 suite goes first, by Go's rule (crypto/tls since 1.17):
/// ChaCha20-Poly1305 when this machine has no AES instructions (a
/// Raspberry Pi 4: the BCM2711's Cortex-A72 cores are built without the
/// ARMv8 crypto extensions, so AES-GCM runs in software, several times
/// slower than ChaCha20), or when the client lists it before either
/// AES-GCM suite (which a client without them does, so it is spared the
/// slow suite); else AES-GCM, AES-128 before AES-256, as browsers order
/// them: 10 AES rounds to 14 per block, and a key schedule to match, on
/// every record. OpenSSL's clients (curl, wrk) list AES-256 first, and
/// rustls would otherwise follow the client's order.
fn prefers_chacha(aes_hardware: bool, offered: &[CipherSuite]) -> bool {
    let first = offered.iter().find(|s| {
        matches!(
            s,
            CipherSuite::TLS13_AES_128_GCM_SHA256
                | CipherSuite::TLS13_AES_256_GCM_SHA384
                | CipherSuite::TLS13_CHACHA20_POLY1305_SHA256
        )
    });
    !aes_hardware || first == Some(&CipherSuite::TLS13_CHACHA20_POLY1305_SHA256)
}

/// Whether ring's AES-GCM runs on AES and carry-less multiply
/// instructions here (AES-NI and PCLMULQDQ; ARMv8's AES and PMULL).
pub fn aes_hardware() -> bool {
    #[cfg(target_arch = "x86_64")]
    return std::arch::is_x86_feature_detected!("aes") && std::arch::is_x86_feature_detected!("pclmulqdq");
    #[cfg(target_arch = "aarch64")]
    return std::arch::is_aarch64_feature_detected!("aes") && std::arch::is_aarch64_feature_detected!("pmull");
    #[allow(unreachable_code)]
    false
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

#[cfg(test)]
mod tests {
    use super::*;
    use CipherSuite::{TLS13_AES_128_CCM_SHA256 as CCM, TLS13_CHACHA20_POLY1305_SHA256 as CHACHA};
    use CipherSuite::{TLS13_AES_128_GCM_SHA256 as AES128, TLS13_AES_256_GCM_SHA384 as AES256};

    #[test]
    fn chacha_goes_first_without_aes_instructions_or_when_the_client_puts_it_first() {
        // OpenSSL's order, a browser's, a client without AES instructions.
        let openssl = [AES256, CHACHA, AES128];
        let browser = [AES128, AES256, CHACHA];
        let no_aes = [CCM, CHACHA, AES128, AES256];
        assert!(!prefers_chacha(true, &openssl));
        assert!(!prefers_chacha(true, &browser));
        assert!(prefers_chacha(true, &no_aes), "a suite this server lacks does not count");
        assert!(prefers_chacha(true, &[CHACHA]));
        assert!(!prefers_chacha(true, &[]));
        for offered in [&openssl[..], &browser, &no_aes, &[AES128]] {
            assert!(prefers_chacha(false, offered), "{offered:?}");
        }
    }
}
