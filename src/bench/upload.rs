//! `pith bench upload`: picture uploads against a running server. A 12 MP
//! JPEG of about 3 MB is made here (gradients and grain, like a phone
//! photo), then uploaded N times over C connections at once; prints
//! uploads/s, latency, the server's resident memory idle and at its peak
//! (`--server-pid`, sampled every 10 ms), and the bytes the server stored
//! against the bytes sent. Every upload is the same picture, so after the
//! first the server finds its files written already; it decodes, shrinks
//! and encodes each one all the same.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use bytes::Bytes;
use clap::Args;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use image::{Rgb, RgbImage};

use super::procstat;

#[derive(Debug, Clone, Args)]
pub struct UploadArgs {
    /// The server.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    pub url: String,

    /// A bearer token to upload with (`pith user add` prints one; run the
    /// server with `--rate-limits false`).
    #[arg(long, env = "PITH_BENCH_TOKEN")]
    pub token: String,

    /// Uploads in all.
    #[arg(long, short = 'n', default_value_t = 20)]
    pub uploads: usize,

    /// Uploads at once.
    #[arg(long, short = 'c', default_value_t = 4)]
    pub concurrency: usize,

    /// The server's process id, for its memory.
    #[arg(long)]
    pub server_pid: Option<u32>,

    /// The photo's width and height.
    #[arg(long, default_value_t = 4000)]
    pub width: u32,
    #[arg(long, default_value_t = 3000)]
    pub height: u32,
}

/// A photo-like picture: smooth gradients with grain, which JPEG at
/// quality 90 encodes to about 2 bits a pixel, as a phone does.
pub fn photo(width: u32, height: u32) -> anyhow::Result<Vec<u8>> {
    let mut state = 0x2545_f491_u32;
    let img = RgbImage::from_fn(width, height, |x, y| {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        let grain = (state % 16) as i32 - 8;
        let shade = |v: u32| (v as i32 + grain).clamp(0, 255) as u8;
        Rgb([shade(x * 255 / width), shade(y * 255 / height), shade(((x / 7 + y / 5) % 256) / 2 + 60)])
    });
    let mut out = Vec::new();
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, 90)
        .encode_image(&img)
        .context("encoding the photo")?;
    Ok(out)
}

const BOUNDARY: &str = "pith-bench-upload";

fn form(jpeg: &[u8]) -> Bytes {
    let mut body = format!(
        "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"photo.jpg\"\r\n\
         Content-Type: image/jpeg\r\n\r\n"
    )
    .into_bytes();
    body.extend_from_slice(jpeg);
    body.extend_from_slice(format!("\r\n--{BOUNDARY}--\r\n").as_bytes());
    Bytes::from(body)
}

pub fn main(args: UploadArgs) -> anyhow::Result<()> {
    tokio::runtime::Builder::new_multi_thread().enable_all().build()?.block_on(run(args))
}

async fn run(args: UploadArgs) -> anyhow::Result<()> {
    let made = Instant::now();
    let jpeg = photo(args.width, args.height)?;
    println!(
        "photo: {}x{} JPEG, {:.2} MB, made in {:.1} s",
        args.width,
        args.height,
        jpeg.len() as f64 / 1e6,
        made.elapsed().as_secs_f64()
    );
    let body = form(&jpeg);
    let uri: hyper::Uri = format!("{}/api/v1/media", args.url.trim_end_matches('/')).parse()?;
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let idle = args.server_pid.and_then(|p| procstat::sample(Some(p))).map(|s| s.rss);
    let peak = Arc::new(AtomicU64::new(idle.unwrap_or(0)));
    let done = Arc::new(AtomicBool::new(false));
    let sampler = args.server_pid.map(|pid| {
        let (peak, done) = (peak.clone(), done.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                if let Some(s) = procstat::sample(Some(pid)) {
                    peak.fetch_max(s.rss, Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        })
    });
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut workers = Vec::new();
    for _ in 0..args.concurrency.max(1) {
        let (client, uri, body, next) = (client.clone(), uri.clone(), body.clone(), next.clone());
        let (token, total) = (args.token.clone(), args.uploads);
        workers.push(tokio::spawn(async move {
            let mut times = Vec::new();
            let mut stored = None;
            let mut failures = Vec::new();
            while next.fetch_add(1, Ordering::Relaxed) < total {
                let req = hyper::Request::post(uri.clone())
                    .header(hyper::header::AUTHORIZATION, format!("Bearer {token}"))
                    .header(hyper::header::CONTENT_TYPE, format!("multipart/form-data; boundary={BOUNDARY}"))
                    .body(Full::new(body.clone()))?;
                let t = Instant::now();
                let res = client.request(req).await?;
                let status = res.status();
                let answer = res.into_body().collect().await?.to_bytes();
                times.push(t.elapsed());
                if status.as_u16() == 201 {
                    let v: serde_json::Value = serde_json::from_slice(&answer)?;
                    stored = v["bytes"].as_u64();
                } else {
                    failures.push(format!("{status}: {}", String::from_utf8_lossy(&answer)));
                }
            }
            anyhow::Ok((times, stored, failures))
        }));
    }
    let mut times = Vec::new();
    let mut stored = None;
    let mut failures = Vec::new();
    for w in workers {
        let (t, s, f) = w.await??;
        times.extend(t);
        stored = stored.or(s);
        failures.extend(f);
    }
    let elapsed = started.elapsed();
    done.store(true, Ordering::Relaxed);
    if let Some(s) = sampler {
        let _ = s.join();
    }
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "{} uploads, {} at once: {:.2} uploads/s; latency median {:.0} ms, max {:.0} ms; {} failed",
        times.len(),
        args.concurrency,
        times.len() as f64 / elapsed.as_secs_f64(),
        times.get(times.len() / 2).map_or(0.0, |d| ms(*d)),
        times.last().map_or(0.0, |d| ms(*d)),
        failures.len()
    );
    if let Some(first) = failures.first() {
        println!("first failure: {first}");
    }
    if let Some(idle) = idle {
        let peak = peak.load(Ordering::Relaxed);
        println!(
            "server RSS: {:.1} MB idle, {:.1} MB peak, {:.1} MB above idle",
            idle as f64 / 1e6,
            peak as f64 / 1e6,
            peak.saturating_sub(idle) as f64 / 1e6
        );
    }
    if let Some(stored) = stored {
        println!(
            "stored {:.2} MB (picture and thumbnail) for {:.2} MB sent: {:.1} % saved",
            stored as f64 / 1e6,
            jpeg.len() as f64 / 1e6,
            100.0 * (1.0 - stored as f64 / jpeg.len() as f64)
        );
    }
    Ok(())
}
