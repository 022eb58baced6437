//! The live-update settings (`--live-*`): heartbeats and the limits that
//! keep memory bounded whatever clients do.

use std::time::Duration;

use clap::Args;

use crate::settings::parse_interval;

/// Live updates (docs/LIVE.md): heartbeats and the limits that keep
/// memory bounded whatever clients do.
#[derive(Debug, Clone, Args)]
pub struct LiveConfig {
    /// How often idle live sockets are pinged ("16s", "500ms"); one that has
    /// not answered by the next ping is closed.
    #[arg(long = "live-ping-interval", env = "PITH_LIVE_PING_INTERVAL", default_value = "16s", value_parser = parse_interval)]
    pub ping_interval: Duration,

    /// Most live connections (WebSocket and SSE) at once. Default (`auto`):
    /// the open files --max-connections leaves, within a quarter of
    /// --memory-mb at 4 KiB a socket.
    #[arg(long = "live-max-sockets", env = "PITH_LIVE_MAX_SOCKETS", default_value_t = LiveConfig::MAX_SOCKETS)]
    pub max_sockets: usize,

    /// Most live connections from one IP address (behind a reverse proxy,
    /// every client shares the proxy's address: raise this).
    #[arg(long = "live-max-sockets-per-ip", env = "PITH_LIVE_MAX_SOCKETS_PER_IP", default_value_t = LiveConfig::MAX_SOCKETS_PER_IP)]
    pub max_sockets_per_ip: u32,

    /// Most topic and community subscriptions on one connection.
    #[arg(long = "live-max-subscriptions", env = "PITH_LIVE_MAX_SUBSCRIPTIONS", default_value_t = LiveConfig::MAX_SUBSCRIPTIONS)]
    pub max_subscriptions: usize,

    /// Largest message a client may send, in bytes.
    #[arg(long = "live-max-message-bytes", env = "PITH_LIVE_MAX_MESSAGE_BYTES", default_value_t = LiveConfig::MAX_MESSAGE_BYTES)]
    pub max_message_bytes: usize,

    /// KiB of output a socket may have waiting beyond the kernel's buffer
    /// before it is dropped as too slow (one event always fits).
    #[arg(long = "live-max-pending-kb", env = "PITH_LIVE_MAX_PENDING_KB", default_value_t = LiveConfig::MAX_PENDING_KB)]
    pub max_pending_kb: usize,

    /// KiB of kernel send buffer per live socket (the kernel doubles it;
    /// 0 keeps its autotuning, which lets one slow client take ~4 MiB).
    #[arg(long = "live-send-buffer-kb", env = "PITH_LIVE_SEND_BUFFER_KB", default_value_t = LiveConfig::SEND_BUFFER_KB)]
    pub send_buffer_kb: usize,

    /// MiB of waiting output for all sockets together; past it, sockets
    /// that cannot take an event are dropped as too slow. Default (`auto`):
    /// an eighth of --memory-mb.
    #[arg(long = "live-max-pending-total-mb", env = "PITH_LIVE_MAX_PENDING_TOTAL_MB", default_value_t = LiveConfig::MAX_PENDING_TOTAL_MB)]
    pub max_pending_total_mb: usize,

    /// Events buffered per channel; a subscriber that falls this far behind
    /// is dropped (it must reload what it missed).
    #[arg(long = "live-channel-capacity", env = "PITH_LIVE_CHANNEL_CAPACITY", default_value_t = LiveConfig::CHANNEL_CAPACITY)]
    pub channel_capacity: usize,

    /// Most channels (topics, communities, inboxes with a subscriber) at once.
    #[arg(long = "live-max-channels", env = "PITH_LIVE_MAX_CHANNELS", default_value_t = LiveConfig::MAX_CHANNELS)]
    pub max_channels: usize,

    /// Origins besides the site's own (`scheme://host[:port]`,
    /// comma-separated) whose pages may open a user's inbox; a page from any
    /// other origin may follow only public topics and communities.
    #[arg(long = "live-allowed-origins", env = "PITH_LIVE_ALLOWED_ORIGINS", default_value = "", value_parser = super::origin::check_list)]
    pub allowed_origins: String,
}

impl LiveConfig {
    pub const MAX_SOCKETS: usize = 250_000;
    pub const MAX_SOCKETS_PER_IP: u32 = 256;
    pub const MAX_SUBSCRIPTIONS: usize = 32;
    pub const MAX_MESSAGE_BYTES: usize = 4096;
    pub const MAX_PENDING_KB: usize = 64;
    pub const MAX_PENDING_TOTAL_MB: usize = 64;
    pub const SEND_BUFFER_KB: usize = 64;
    pub const CHANNEL_CAPACITY: usize = 32;
    pub const MAX_CHANNELS: usize = 65_536;
}

impl Default for LiveConfig {
    fn default() -> Self {
        LiveConfig {
            ping_interval: Duration::from_secs(16),
            max_sockets: Self::MAX_SOCKETS,
            max_sockets_per_ip: Self::MAX_SOCKETS_PER_IP,
            max_subscriptions: Self::MAX_SUBSCRIPTIONS,
            max_message_bytes: Self::MAX_MESSAGE_BYTES,
            max_pending_kb: Self::MAX_PENDING_KB,
            max_pending_total_mb: Self::MAX_PENDING_TOTAL_MB,
            send_buffer_kb: Self::SEND_BUFFER_KB,
            channel_capacity: Self::CHANNEL_CAPACITY,
            max_channels: Self::MAX_CHANNELS,
            allowed_origins: String::new(),
        }
    }
}
