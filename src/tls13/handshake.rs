//! A server's TLS 1.3 handshake with rustls, fed one record at a time, so
//! that not a byte past the client's `Finished` leaves the socket: the
//! first request after the handshake (often in the same segment as
//! `Finished`) stays in the kernel for the record layer (`Records`).
//!
//! Why not tokio-rustls: its stream reads as much as the socket holds into
//! rustls's buffer, and rustls hands no partly received record over with
//! its keys (`dangerous_extract_secrets`), so the connection could not
//! leave rustls after the handshake without losing bytes.

use std::io::{self, ErrorKind};
use std::sync::{Arc, Mutex};

use tokio::net::TcpStream;
use tokio_rustls::rustls::server::{AcceptedAlert, Acceptor, ClientHello};
use tokio_rustls::rustls::{KeyLog, ServerConfig};

use super::Records;

/// Largest record a client may send during the handshake: a plaintext
/// record (RFC 8446, 5.1) or an encrypted one (5.2).
const MAX_RECORD: usize = 5 + (1 << 14) + 256;

/// The application traffic secrets of one handshake (client's, server's),
/// as rustls logs them: the record layer needs them for key updates, and
/// rustls hands over only the keys made from them. rustls's `KeyLog` is
/// the one place it gives them out (for SSLKEYLOGFILE); this one keeps
/// them for its connection alone, in memory.
#[derive(Default)]
struct TrafficSecrets(Mutex<(Vec<u8>, Vec<u8>)>);

impl std::fmt::Debug for TrafficSecrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TrafficSecrets")
    }
}

impl KeyLog for TrafficSecrets {
    fn will_log(&self, label: &str) -> bool {
        matches!(label, "CLIENT_TRAFFIC_SECRET_0" | "SERVER_TRAFFIC_SECRET_0")
    }

    fn log(&self, label: &str, _client_random: &[u8], secret: &[u8]) {
        let mut both = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match label {
            "CLIENT_TRAFFIC_SECRET_0" => both.0 = secret.to_vec(),
            "SERVER_TRAFFIC_SECRET_0" => both.1 = secret.to_vec(),
            _ => {}
        }
    }
}

impl Drop for TrafficSecrets {
    fn drop(&mut self) {
        let both = self.0.get_mut().unwrap_or_else(|e| e.into_inner());
        super::records::wipe(&mut both.0);
        super::records::wipe(&mut both.1);
    }
}

/// A finished handshake: the record layer, and whether ALPN chose HTTP/2.
pub struct Accepted {
    pub records: Box<Records>,
    pub h2: bool,
}

/// Runs the handshake on `tcp` with the configuration `config_for` picks
/// for the client's hello (its cipher suites: `net::tls::Tls::config_for`),
/// and hands the connection's keys to a record layer; rustls's state is
/// dropped. An error names why the handshake failed (rustls's alert has
/// been sent when it had one). No time limit: the caller sets one.
pub async fn accept(
    tcp: &TcpStream,
    config_for: impl FnOnce(&ClientHello<'_>) -> Arc<ServerConfig>,
) -> io::Result<Accepted> {
    let mut record = Vec::new();
    let mut acceptor = Acceptor::default();
    let hello = loop {
        read_record(tcp, &mut record).await?;
        let mut rest = &record[..];
        while !rest.is_empty() {
            acceptor.read_tls(&mut rest)?;
        }
        match acceptor.accept() {
            Ok(Some(hello)) => break hello,
            Ok(None) => {}
            Err((e, alert)) => return Err(alerted(tcp, e, alert).await),
        }
    };
    // The chosen configuration with a key log of this connection's own (a
    // shallow copy: the certificates, tickets and sessions are shared).
    let secrets = Arc::new(TrafficSecrets::default());
    let mut config = ServerConfig::clone(&config_for(&hello.client_hello()));
    config.key_log = secrets.clone();
    let mut conn = match hello.into_connection(Arc::new(config)) {
        Ok(conn) => conn,
        Err((e, alert)) => return Err(alerted(tcp, e, alert).await),
    };
    loop {
        // rustls's flight, its session tickets after the client's
        // `Finished`, or an alert.
        while conn.wants_write() {
            let mut out = Vec::new();
            conn.write_tls(&mut out)?;
            write_all(tcp, &out).await?;
        }
        if !conn.is_handshaking() {
            break;
        }
        read_record(tcp, &mut record).await?;
        let mut rest = &record[..];
        while !rest.is_empty() {
            conn.read_tls(&mut rest)?;
            if let Err(e) = conn.process_new_packets() {
                let mut alert = Vec::new();
                if conn.write_tls(&mut alert).is_ok() {
                    let _ = write_all(tcp, &alert).await;
                }
                return Err(io::Error::new(ErrorKind::InvalidData, e));
            }
        }
    }
    let h2 = conn.alpn_protocol() == Some(b"h2");
    let keys = conn.dangerous_extract_secrets().map_err(io::Error::other)?;
    let records = {
        let both = secrets.0.lock().unwrap_or_else(|e| e.into_inner());
        Records::new(keys, &both.1, &both.0)?
    };
    Ok(Accepted { records: Box::new(records), h2 })
}

/// Sends the alert rustls made for a bad hello (if any), and the error.
async fn alerted(tcp: &TcpStream, e: tokio_rustls::rustls::Error, mut alert: AcceptedAlert) -> io::Error {
    let mut out = Vec::new();
    if alert.write_all(&mut out).is_ok() && !out.is_empty() {
        let _ = write_all(tcp, &out).await;
    }
    io::Error::new(ErrorKind::InvalidData, e)
}

/// Reads exactly one TLS record (header and body) into `record`.
async fn read_record(tcp: &TcpStream, record: &mut Vec<u8>) -> io::Result<()> {
    record.clear();
    record.resize(5, 0);
    read_exact(tcp, &mut record[..]).await?;
    let len = 5 + usize::from(u16::from_be_bytes([record[3], record[4]]));
    if len > MAX_RECORD {
        return Err(io::Error::new(ErrorKind::InvalidData, "a TLS record longer than a record may be"));
    }
    record.resize(len, 0);
    read_exact(tcp, &mut record[5..]).await
}

async fn read_exact(tcp: &TcpStream, mut buf: &mut [u8]) -> io::Result<()> {
    while !buf.is_empty() {
        tcp.readable().await?;
        match tcp.try_read(buf) {
            Ok(0) => return Err(ErrorKind::UnexpectedEof.into()),
            Ok(n) => buf = &mut buf[n..],
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

async fn write_all(tcp: &TcpStream, mut buf: &[u8]) -> io::Result<()> {
    while !buf.is_empty() {
        tcp.writable().await?;
        match tcp.try_write(buf) {
            Ok(0) => return Err(ErrorKind::WriteZero.into()),
            Ok(n) => buf = &buf[n..],
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
