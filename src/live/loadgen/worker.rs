//! One load-generator process: opens its share of the subscribers, keeps
//! them alive (answering server pings), pings each on a schedule and
//! records round trips, and records when each receives a post. It takes
//! commands on stdin and answers with one line each on stdout; the parent
//! merges what every worker reports.
//!
//! Commands: `ping` (start the ping schedule), `stop` (stop it and report
//! `rtt` samples), `expect` (record the next post on every socket; answers
//! `armed`, then `arrivals` when all have one or after 10 s), `quit`.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use base64::Engine;
use rand::Rng;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpSocket;
use tokio::sync::watch;

use super::http::{Io, Target};
use super::{WsBenchArgs, monotonic_ns};
use crate::live::frame::{self, OP_CLOSE, OP_PING, OP_PONG, OP_TEXT};

/// What this worker was asked to do (`PITH_WS_WORKER`).
#[derive(Debug, Clone, Copy)]
pub struct Share {
    pub index: usize,
    pub connections: usize,
    pub topic: i64,
}

impl Share {
    pub fn encode(&self) -> String {
        format!("{},{},{}", self.index, self.connections, self.topic)
    }

    pub fn decode(s: &str) -> anyhow::Result<Share> {
        let p: Vec<&str> = s.split(',').collect();
        let [i, n, t] = p[..] else { bail!("bad worker spec {s:?}") };
        Ok(Share { index: i.parse()?, connections: n.parse()?, topic: t.parse()? })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Idle,
    Pinging,
    Quit,
}

/// What all of this worker's connections share.
struct Shared {
    ping_interval: Duration,
    phase: watch::Receiver<Phase>,
    expecting: AtomicBool,
    /// Ping round trips, microseconds.
    rtts: Mutex<Vec<u32>>,
    /// When each socket received the expected post (CLOCK_MONOTONIC ns).
    arrivals: Mutex<Vec<u64>>,
    open: AtomicUsize,
}

pub fn run(args: &WsBenchArgs, share: Share) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build()?;
    rt.block_on(work(args, share))
}

async fn work(args: &WsBenchArgs, share: Share) -> anyhow::Result<()> {
    let target = Target::parse(&args.url, args.tls_ca.as_deref())?;
    let sources = source_ips(&args.source_ips, target.addr.ip())?;
    let (phase_tx, phase) = watch::channel(Phase::Idle);
    let shared = Arc::new(Shared {
        ping_interval: args.ping_interval,
        phase,
        expecting: AtomicBool::new(false),
        rtts: Mutex::new(Vec::new()),
        arrivals: Mutex::new(Vec::with_capacity(share.connections)),
        open: AtomicUsize::new(0),
    });
    let path = format!("/api/v1/live?topics={}", share.topic);

    let started = Instant::now();
    let (mut ok, mut failed, mut first_error) = (0usize, 0usize, None);
    let mut n = 0;
    while n < share.connections {
        let batch = args.batch.max(1).min(share.connections - n);
        let mut set = tokio::task::JoinSet::new();
        for i in n..n + batch {
            let source = sources.get((share.index * share.connections + i) % sources.len().max(1)).copied();
            let (target, path) = (target.clone(), path.clone());
            set.spawn(async move { connect(&target, source, &path).await });
        }
        while let Some(res) = set.join_next().await {
            match res.map_err(anyhow::Error::from).and_then(|r| r) {
                Ok(tcp) => {
                    ok += 1;
                    shared.open.fetch_add(1, Ordering::Relaxed);
                    tokio::spawn(client(tcp, shared.clone()));
                }
                Err(e) => {
                    failed += 1;
                    first_error.get_or_insert_with(|| format!("{e:#}"));
                }
            }
        }
        n += batch;
    }
    let secs = started.elapsed().as_secs_f64();
    say(&format!("ready {ok} {failed} {secs:.3} {}", first_error.unwrap_or_default().replace('\n', " ")));

    let mut stdin = BufReader::new(tokio::io::stdin()).lines();
    while let Some(line) = stdin.next_line().await? {
        match line.trim() {
            "ping" => {
                let _ = phase_tx.send(Phase::Pinging);
            }
            "stop" => {
                let _ = phase_tx.send(Phase::Idle);
                let rtts = std::mem::take(&mut *shared.rtts.lock().unwrap_or_else(|p| p.into_inner()));
                say(&format!("rtt {}", join(&rtts)));
            }
            "expect" => {
                shared.arrivals.lock().unwrap_or_else(|p| p.into_inner()).clear();
                shared.expecting.store(true, Ordering::SeqCst);
                say("armed");
                let deadline = Instant::now() + Duration::from_secs(10);
                let want = shared.open.load(Ordering::Relaxed);
                loop {
                    let got = shared.arrivals.lock().unwrap_or_else(|p| p.into_inner()).len();
                    if got >= want || Instant::now() > deadline {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
                shared.expecting.store(false, Ordering::SeqCst);
                let arrivals = std::mem::take(&mut *shared.arrivals.lock().unwrap_or_else(|p| p.into_inner()));
                say(&format!("arrivals {want} {}", join(&arrivals)));
            }
            "quit" => break,
            _ => {}
        }
    }
    let _ = phase_tx.send(Phase::Quit);
    Ok(())
}

fn say(line: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn join<T: ToString>(v: &[T]) -> String {
    v.iter().map(ToString::to_string).collect::<Vec<_>>().join(",")
}

/// `127.0.0.2-127.0.0.9` as addresses, used only for a loopback target
/// (each source address has its own ephemeral ports).
fn source_ips(spec: &str, target: IpAddr) -> anyhow::Result<Vec<IpAddr>> {
    if !target.is_loopback() || spec.is_empty() {
        return Ok(Vec::new());
    }
    let (a, b) = spec.split_once('-').unwrap_or((spec, spec));
    let (a, b): (Ipv4Addr, Ipv4Addr) = (a.trim().parse()?, b.trim().parse()?);
    let (a, b) = (u32::from(a), u32::from(b));
    if b < a || b - a > 255 {
        bail!("--source-ips must be a range of at most 256 addresses");
    }
    Ok((a..=b).map(|ip| IpAddr::V4(Ipv4Addr::from(ip))).collect())
}

/// Connects, upgrades, and waits for the `subscribed` greeting.
async fn connect(target: &Target, source: Option<IpAddr>, path: &str) -> anyhow::Result<Box<dyn Io>> {
    let socket = if target.addr.is_ipv4() { TcpSocket::new_v4()? } else { TcpSocket::new_v6()? };
    if let Some(ip) = source {
        // Let connect() pick the port, so ports are unique per
        // (source, destination) rather than per source.
        use std::os::fd::AsRawFd;
        let on: libc::c_int = 1;
        // SAFETY: setsockopt reads one c_int from a live local.
        unsafe {
            libc::setsockopt(
                socket.as_raw_fd(),
                libc::IPPROTO_IP,
                libc::IP_BIND_ADDRESS_NO_PORT,
                (&on as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
        }
        socket.bind(SocketAddr::new(ip, 0)).with_context(|| format!("bind {ip}"))?;
    }
    let tcp = tokio::time::timeout(Duration::from_secs(10), socket.connect(target.addr))
        .await
        .context("connect timed out")?
        .context("connect")?;
    let _ = tcp.set_nodelay(true);
    let mut tcp = tokio::time::timeout(Duration::from_secs(20), target.wrap(tcp)).await.context("TLS timed out")??;
    let key = base64::engine::general_purpose::STANDARD.encode(rand::rng().random::<[u8; 16]>());
    let req = format!(
        "GET {path} HTTP/1.1\r\nHost: {}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n",
        target.host
    );
    tcp.write_all(req.as_bytes()).await?;
    let greeted = async {
        let mut buf = Vec::with_capacity(512);
        loop {
            let mut chunk = [0u8; 512];
            let n = tcp.read(&mut chunk).await?;
            if n == 0 {
                bail!("closed during the handshake");
            }
            buf.extend_from_slice(&chunk[..n]);
            let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else { continue };
            if !buf.starts_with(b"HTTP/1.1 101") {
                bail!("refused: {}", String::from_utf8_lossy(&buf[..end]).lines().next().unwrap_or(""));
            }
            let rest = &buf[end + 4..];
            if let Ok(Some(head)) = frame::parse_head(rest, usize::MAX)
                && rest.len() >= head.frame_len()
            {
                return Ok(());
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(20), greeted).await.context("no greeting within 20 s")??;
    Ok(tcp)
}

/// One subscriber: answers pings, pings on schedule, notes posts.
async fn client(mut tcp: Box<dyn Io>, shared: Arc<Shared>) {
    let mut phase = shared.phase.clone();
    let mut buf = vec![0u8; 2048];
    let mut have = 0;
    let mut next_ping: Option<tokio::time::Instant> = None;
    loop {
        let ping_due = async {
            match next_ping {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            read = tcp.read(&mut buf[have..]) => {
                let n = match read { Ok(0) | Err(_) => break, Ok(n) => n };
                have += n;
                match frames(&mut tcp, &buf[..have], &shared).await {
                    Ok(used) => {
                        buf.copy_within(used..have, 0);
                        have -= used;
                        if have == buf.len() {
                            buf.resize(buf.len() * 2, 0);
                        }
                    }
                    Err(()) => break,
                }
            }
            changed = phase.changed() => {
                if changed.is_err() { break }
                let p = *phase.borrow_and_update();
                match p {
                    Phase::Quit => break,
                    Phase::Idle => next_ping = None,
                    Phase::Pinging => {
                        let offset = rand::rng().random_range(0..shared.ping_interval.as_millis().max(1) as u64);
                        next_ping = Some(tokio::time::Instant::now() + Duration::from_millis(offset));
                    }
                }
            }
            _ = ping_due => {
                let ping = frame::frame(OP_PING, &monotonic_ns().to_be_bytes(), Some(mask()));
                if tcp.write_all(&ping).await.is_err() { break }
                next_ping = next_ping.map(|t| t + shared.ping_interval);
            }
        }
    }
    shared.open.fetch_sub(1, Ordering::Relaxed);
}

fn mask() -> [u8; 4] {
    rand::rng().random()
}

/// Handles the complete server frames in `buf`; returns the bytes used.
async fn frames(tcp: &mut Box<dyn Io>, buf: &[u8], shared: &Shared) -> Result<usize, ()> {
    let mut pos = 0;
    while let Ok(Some(head)) = frame::parse_head(&buf[pos..], usize::MAX) {
        if buf.len() - pos < head.frame_len() {
            break;
        }
        let payload = &buf[pos + head.header_len..pos + head.frame_len()];
        match head.opcode {
            OP_PING => {
                let pong = frame::frame(OP_PONG, payload, Some(mask()));
                tcp.write_all(&pong).await.map_err(|_| ())?;
            }
            OP_PONG if payload.len() == 8 => {
                let sent = u64::from_be_bytes(payload.try_into().map_err(|_| ())?);
                let us = (monotonic_ns().saturating_sub(sent) / 1000).min(u64::from(u32::MAX)) as u32;
                shared.rtts.lock().unwrap_or_else(|p| p.into_inner()).push(us);
            }
            OP_TEXT if shared.expecting.load(Ordering::Relaxed) && payload.starts_with(br#"{"type":"post""#) => {
                let now = monotonic_ns();
                shared.arrivals.lock().unwrap_or_else(|p| p.into_inner()).push(now);
            }
            OP_CLOSE => return Err(()),
            _ => {}
        }
        pos += head.frame_len();
    }
    Ok(pos)
}
