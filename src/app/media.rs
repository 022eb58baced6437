//! Pictures: their settings, an upload from its multipart body to its
//! stored files and row, and the removal of pictures nothing shows any
//! more. `media` (the crate's bottom layer) decodes and names them; the
//! doors (`api::media`, `web::media`) read the request and serve files.
//!
//! An upload: the rate limit; the body read as it streams, refused past
//! `--media-max-bytes`; the picture processed on the bounded pool; its two
//! files written durably (`media::files`); then its row, within the
//! quotas, in one transaction. The files come first, so an acknowledged
//! upload's files exist; a refused row removes files it alone wrote.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use axum::extract::Multipart;
use axum::http::StatusCode;
use bytes::{Bytes, BytesMut};
use clap::Args;
use serde::Serialize;

use super::limits::{Action, ClientIp, Who};
use super::{App, AppError, AppResult, AppState, commit};
use crate::media::files::MediaDir;
use crate::media::pool::{Pool, PoolError};
use crate::media::{Limits, MediaName, Processed, Refusal};
use crate::model::media::{Media, MediaQuota, MediaUsage, Recorded};
use crate::model::{Timestamp, User};
use crate::store::Store;

/// How long one picture may take, its wait for a worker included.
pub const PROCESS_LIMIT: Duration = Duration::from_secs(30);
/// Room for the multipart framing and small fields around the file.
pub const FORM_OVERHEAD: u64 = 64 * 1024;

/// Pictures (docs/DEPLOY.md, "Pictures").
#[derive(Debug, Clone, Args)]
pub struct MediaConfig {
    /// Largest picture upload, in bytes; a larger body is refused (413)
    /// as it streams in, never read whole.
    #[arg(long, env = "PITH_MEDIA_MAX_BYTES", default_value_t = 10 << 20,
          value_parser = clap::value_parser!(u64).range(1024..=1 << 30))]
    pub media_max_bytes: u64,

    /// Most pixels (width x height) an uploaded picture may declare,
    /// checked from its header before anything is decoded (413).
    #[arg(long, env = "PITH_MEDIA_MAX_PIXELS", default_value_t = 40_000_000,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000_000))]
    pub media_max_pixels: u64,

    /// Longest side of a stored picture, in pixels; larger ones are shrunk.
    #[arg(long, env = "PITH_MEDIA_MAX_SIDE", default_value_t = 2048,
          value_parser = clap::value_parser!(u32).range(320..=16384))]
    pub media_max_side: u32,

    /// MiB of pictures one account may store (413 `quota_exceeded`);
    /// 0: no limit.
    #[arg(long, env = "PITH_MEDIA_QUOTA_USER_MB", default_value_t = 200)]
    pub media_quota_user_mb: u64,

    /// MiB of pictures the whole forum may store (507); 0: no limit.
    #[arg(long, env = "PITH_MEDIA_QUOTA_TOTAL_MB", default_value_t = 10240)]
    pub media_quota_total_mb: u64,

    /// MiB that pictures being decoded may take together: each waits for
    /// what its header says it needs (4 bytes a pixel), besides one at a
    /// time per core. The default lets one 12 MP photo decode at a time.
    #[arg(long, env = "PITH_MEDIA_DECODE_MB", default_value_t = 64,
          value_parser = clap::value_parser!(u32).range(16..=65536))]
    pub media_decode_mb: u32,

    /// Directory of the stored pictures; default: `media` in the data
    /// dir. Nodes serving one PostgreSQL database must share it.
    #[arg(long, env = "PITH_MEDIA_DIR")]
    pub media_dir: Option<PathBuf>,
}

impl Default for MediaConfig {
    fn default() -> Self {
        MediaConfig {
            media_max_bytes: 10 << 20,
            media_max_pixels: 40_000_000,
            media_max_side: 2048,
            media_quota_user_mb: 200,
            media_quota_total_mb: 10240,
            media_decode_mb: 64,
            media_dir: None,
        }
    }
}

/// The pictures' settings in force, and the pool and lock they share.
pub struct Pictures {
    pub dir: MediaDir,
    pub limits: Limits,
    pub max_bytes: u64,
    pub quota: MediaQuota,
    pool: Pool,
    /// Held while an upload writes its files and records its row, and
    /// while freed rows are deleted and their files removed: on one node,
    /// a picture uploaded again just as it is freed keeps its files.
    files: tokio::sync::Mutex<()>,
    /// One per decoding thread: an upload holds one from before its body
    /// is read until it is stored (`upload_slot`), so no more bodies are
    /// in memory than pictures can be decoded at once. The others wait
    /// unread in their sockets, where TCP holds their senders back.
    slots: Arc<tokio::sync::Semaphore>,
}

impl Pictures {
    pub fn new(cfg: &MediaConfig, dir: PathBuf) -> Pictures {
        Pictures {
            dir: MediaDir::new(dir),
            limits: Limits { max_pixels: cfg.media_max_pixels, max_side: cfg.media_max_side, ..Limits::default() },
            max_bytes: cfg.media_max_bytes,
            quota: MediaQuota {
                user_bytes: cfg.media_quota_user_mb << 20,
                total_bytes: cfg.media_quota_total_mb << 20,
            },
            pool: Pool::per_core(cfg.media_decode_mb, PROCESS_LIMIT),
            files: tokio::sync::Mutex::new(()),
            slots: Arc::new(tokio::sync::Semaphore::new(crate::media::pool::per_core_workers())),
        }
    }
}

/// Set once, by `pith serve` (or a test): until then uploads are refused
/// and `/media/` finds nothing.
#[derive(Default)]
pub struct MediaSettings(OnceLock<Arc<Pictures>>);

impl MediaSettings {
    /// Pictures in `data_dir/media` unless `--media-dir` says otherwise.
    pub fn set(&self, cfg: &MediaConfig, data_dir: &std::path::Path) {
        let dir = cfg.media_dir.clone().unwrap_or_else(|| data_dir.join("media"));
        let _ = self.0.set(Arc::new(Pictures::new(cfg, dir)));
    }

    pub fn get(&self) -> Option<&Arc<Pictures>> {
        self.0.get()
    }

    fn on(&self) -> AppResult<Arc<Pictures>> {
        self.0.get().cloned().ok_or_else(|| {
            AppError::Rejected(StatusCode::SERVICE_UNAVAILABLE, "media_off", "picture uploads are not set up".into())
        })
    }
}

/// What an upload answers (201).
#[derive(Debug, Clone, Serialize)]
pub struct Uploaded {
    /// The picture's name, which is also its id.
    pub id: String,
    pub url: String,
    pub thumbnail_url: String,
    pub width: u32,
    pub height: u32,
    /// The picture and its thumbnail on disk, together.
    pub bytes: i64,
    pub content_type: String,
}

impl Uploaded {
    fn of(media: &Media) -> Uploaded {
        let thumb = MediaName::parse(&media.name).map(|n| n.thumbnail().to_string()).unwrap_or_default();
        Uploaded {
            id: media.name.clone(),
            url: format!("{}{}", crate::markdown::MEDIA_PATH, media.name),
            thumbnail_url: format!("{}{thumb}", crate::markdown::MEDIA_PATH),
            width: media.width,
            height: media.height,
            bytes: media.bytes,
            content_type: media.content_type.clone(),
        }
    }
}

impl Uploaded {
    /// 201 with the picture's address in `Location`.
    pub fn created(self) -> axum::response::Response {
        use axum::response::IntoResponse;
        let location = self.url.clone();
        (StatusCode::CREATED, [(axum::http::header::LOCATION, location)], axum::Json(self)).into_response()
    }
}

/// The request's `Content-Length`, when it states one.
pub fn declared_length(headers: &axum::http::HeaderMap) -> Option<u64> {
    headers.get(axum::http::header::CONTENT_LENGTH)?.to_str().ok()?.parse().ok()
}

/// A multipart form's `file` field, and its `csrf` field when one came
/// before it (the pages' form posts carry their token so).
pub struct FilePart {
    pub bytes: Bytes,
    pub csrf: Option<String>,
}

/// Refuses a declared body longer than an upload may be, before reading.
pub fn check_length<S: Store>(state: &AppState<S>, declared: Option<u64>) -> AppResult<()> {
    let pictures = state.media.on()?;
    match declared {
        Some(n) if n > pictures.max_bytes + FORM_OVERHEAD => {
            state.metrics.media.upload("too_large");
            Err(too_large(pictures.max_bytes))
        }
        _ => Ok(()),
    }
}

fn too_large(max: u64) -> AppError {
    AppError::PayloadTooLarge(usize::try_from(max).unwrap_or(usize::MAX))
}

/// Reads the form's `file` field as it streams, refusing it past
/// `--media-max-bytes`; other fields are read within a small budget.
/// `declared`: the body's length, when stated, so the file is read into
/// one buffer of its size rather than one that doubles as it grows.
pub async fn read_file<S: Store>(
    state: &AppState<S>,
    mut form: Multipart,
    declared: Option<u64>,
) -> AppResult<FilePart> {
    let max = state.media.on()?.max_bytes;
    let mut csrf = None;
    let mut other_bytes = 0u64;
    while let Some(mut field) = form.next_field().await.map_err(multipart_error)? {
        let is_file = field.name() == Some("file");
        let mut buf = match declared {
            Some(n) if is_file => BytesMut::with_capacity(n.min(max) as usize),
            _ => BytesMut::new(),
        };
        while let Some(chunk) = field.chunk().await.map_err(multipart_error)? {
            let over = if is_file {
                buf.len() + chunk.len() > max as usize
            } else {
                other_bytes += chunk.len() as u64;
                other_bytes > FORM_OVERHEAD
            };
            if over {
                state.metrics.media.upload("too_large");
                return Err(too_large(max));
            }
            buf.extend_from_slice(&chunk);
        }
        if is_file {
            return Ok(FilePart { bytes: buf.freeze(), csrf });
        }
        if field.name() == Some("csrf") {
            csrf = Some(String::from_utf8_lossy(&buf).into_owned());
        }
    }
    Err(AppError::BadRequest("missing_file", "send the picture as the multipart field `file`".into()))
}

fn multipart_error(e: axum::extract::multipart::MultipartError) -> AppError {
    if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
        return AppError::Rejected(StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large", e.body_text());
    }
    AppError::BadRequest("invalid_multipart", e.body_text())
}

/// The refusal of a body that is not multipart/form-data.
pub fn not_multipart(why: String) -> AppError {
    AppError::Rejected(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported_media_type",
        format!("send multipart/form-data with the picture as the field `file` ({why})"),
    )
}

/// A turn to upload, held from before the body is read until the picture
/// is stored (`Pictures::slots`); waiting for it counts in the request's
/// time limit.
pub async fn upload_slot<S: Store>(state: &AppState<S>) -> AppResult<tokio::sync::OwnedSemaphorePermit> {
    let pictures = state.media.on()?;
    // The semaphore is never closed.
    pictures.slots.clone().acquire_owned().await.map_err(|e| AppError::Internal(e.to_string()))
}

/// Checks the rate limit of an upload by `user`: before its body is read.
pub fn check_rate<S: Store>(state: &AppState<S>, user: &User, ip: ClientIp) -> AppResult<()> {
    state
        .limits
        .check(Action::Upload, ip, Who::User(user.id))
        .inspect_err(|_| state.metrics.media.upload("rate_limited"))
}

/// Processes and stores `bytes` uploaded by `user` (module doc).
pub async fn upload<S: Store>(state: &AppState<S>, user: User, bytes: Bytes) -> AppResult<Uploaded> {
    let pictures = state.media.on()?;
    let limits = pictures.limits;
    let started = Instant::now();
    let processed = pictures
        .pool
        .run(crate::media::process::decode_mb(&bytes, &limits), move || {
            let out = crate::media::process::process(&bytes, &limits);
            drop(bytes);
            // The decoded picture's tens of MB go back to the kernel now,
            // not whenever the heap next shrinks.
            crate::memory::release_free();
            out
        })
        .await;
    state.metrics.media.processed(started.elapsed().as_secs_f64());
    let processed = match processed {
        Ok(Ok(p)) => p,
        Ok(Err(refusal)) => return Err(refused(state, refusal)),
        Err(e) => return Err(pool_failed(state, e)),
    };
    commit(state, move |st| async move {
        let recorded = write_and_record(&st, &pictures, user, processed).await?;
        let media = match recorded {
            Recorded::New(m) => {
                st.metrics.media.upload("stored");
                m
            }
            Recorded::Existing(m) => {
                st.metrics.media.upload("existing");
                m
            }
            Recorded::OverUserQuota { used } => {
                st.metrics.media.upload("quota_user");
                return Err(AppError::Rejected(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "quota_exceeded",
                    format!(
                        "your pictures take {} of your {} MiB; delete some to upload more",
                        mib(used),
                        pictures.quota.user_bytes >> 20
                    ),
                ));
            }
            Recorded::OverTotalQuota { used } => {
                st.metrics.media.upload("quota_total");
                return Err(AppError::Rejected(
                    StatusCode::INSUFFICIENT_STORAGE,
                    "storage_full",
                    format!(
                        "the forum's storage for pictures is full ({} of {} MiB); an administrator can make room \
                         or raise --media-quota-total-mb",
                        mib(used),
                        pictures.quota.total_bytes >> 20
                    ),
                ));
            }
        };
        refresh_usage(&st).await;
        Ok(Uploaded::of(&media))
    })
    .await
}

/// `bytes` in MiB, to one decimal.
fn mib(bytes: i64) -> String {
    format!("{:.1}", bytes as f64 / f64::from(1u32 << 20))
}

/// Writes the two files, then records the row; removes the files it wrote
/// when the row is refused or fails.
async fn write_and_record<S: Store>(
    st: &AppState<S>,
    pictures: &Arc<Pictures>,
    user: User,
    p: Processed,
) -> AppResult<Recorded> {
    let name = MediaName::of(&p.full.bytes, p.full.width, p.full.height, p.kind);
    let media = Media {
        name: name.to_string(),
        owner_id: Some(user.id),
        bytes: (p.full.bytes.len() + p.thumb.bytes.len()) as i64,
        width: p.full.width,
        height: p.full.height,
        content_type: p.kind.content_type().to_owned(),
        created_at: Timestamp::now(),
    };
    let _files = pictures.files.lock().await;
    let dir = pictures.dir.clone();
    let wrote = tokio::task::spawn_blocking(move || -> std::io::Result<bool> {
        let full = dir.write(&name, &p.full.bytes)?;
        dir.write(&name.thumbnail(), &p.thumb.bytes)?;
        Ok(full)
    })
    .await
    .map_err(|e| AppError::Internal(format!("writing a picture failed: {e}")))?
    .map_err(|e| AppError::Unavailable(format!("cannot write the picture {name}: {e}")))?;
    let recorded = st.store.record_media(media, pictures.quota).await;
    let refused = !matches!(recorded, Ok(Recorded::New(_) | Recorded::Existing(_)));
    if refused && wrote {
        let dir = pictures.dir.clone();
        let _ = tokio::task::spawn_blocking(move || dir.remove(&name)).await;
    }
    Ok(recorded?)
}

fn refused<S: Store>(state: &AppState<S>, refusal: Refusal) -> AppError {
    let message = refusal.to_string();
    match refusal {
        Refusal::Unsupported(_) => {
            state.metrics.media.upload("unsupported");
            AppError::Rejected(StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type", message)
        }
        Refusal::TooManyPixels { .. } => {
            state.metrics.media.upload("too_many_pixels");
            AppError::Rejected(StatusCode::PAYLOAD_TOO_LARGE, "too_many_pixels", message)
        }
        Refusal::Undecodable(_) => {
            state.metrics.media.upload("undecodable");
            AppError::Rejected(StatusCode::UNPROCESSABLE_ENTITY, "undecodable_image", message)
        }
    }
}

fn pool_failed<S: Store>(state: &AppState<S>, e: PoolError) -> AppError {
    match e {
        PoolError::TimedOut(_) => {
            state.metrics.media.upload("busy");
            AppError::Rejected(
                StatusCode::SERVICE_UNAVAILABLE,
                "media_busy",
                format!("{e}; the server is busy with other pictures, try again shortly"),
            )
        }
        PoolError::Panicked => {
            tracing::error!("a picture's decoder panicked");
            state.metrics.media.upload("undecodable");
            AppError::Rejected(
                StatusCode::UNPROCESSABLE_ENTITY,
                "undecodable_image",
                "the picture cannot be decoded".into(),
            )
        }
    }
}

/// Sets the stored-bytes gauges from the store.
async fn refresh_usage<S: Store>(app: &App<S>) {
    if let Ok(u) = app.store.media_usage(None).await {
        app.metrics.media.set_stored(u.files, u.bytes);
    }
}

/// What is stored, by one account or by all (admins).
pub async fn usage<S: Store>(state: &AppState<S>, owner: Option<i64>) -> AppResult<MediaUsage> {
    Ok(state.store.media_usage(owner).await?)
}

/// Removes the files of pictures whose last showing was deleted (after a
/// deletion commits; `pith media gc` does it too). A failure is logged:
/// the deletion stands, and gc finds what was left.
pub async fn sweep<S: Store>(app: &App<S>) -> usize {
    let Some(pictures) = app.media.get() else { return 0 };
    let _files = pictures.files.lock().await;
    let names = match app.store.take_freed_media().await {
        Ok(names) => names,
        Err(e) => {
            tracing::warn!(error = %e, "could not take freed pictures; `pith media gc` will");
            return 0;
        }
    };
    if names.is_empty() {
        return 0;
    }
    let dir = pictures.dir.clone();
    let n = names.len();
    let removed = tokio::task::spawn_blocking(move || {
        for name in names.iter().filter_map(|n| MediaName::parse(n)) {
            if let Err(e) = dir.remove(&name) {
                tracing::warn!(%name, error = %e, "could not remove a freed picture's files");
            }
        }
    })
    .await;
    if removed.is_err() {
        tracing::warn!("removing freed pictures' files failed");
    }
    refresh_usage(app).await;
    n
}
