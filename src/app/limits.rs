//! Rate limits per account and per client address, for the actions abuse
//! goes through: posting, editing, reporting, voting, private messages,
//! uploading pictures, registering and logging in. Each limit
//! is a GCRA bucket from `governor` (a burst, then a steady refill); a
//! request over any of its limits is answered 429 with `Retry-After`
//! before it costs a write or an argon2 hash.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::HeaderName;
use axum::http::request::Parts;
use clap::Args;
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota};

use super::AppError;
use super::AppState;
use crate::settings::parse_interval;
use crate::store::Store;

/// What a request is about to do; each action has its own limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// A new topic or post.
    Post,
    /// An edit of a topic's or post's body: each one renders Markdown again.
    Edit,
    /// A report to moderators: each one is a stored row they must read.
    Report,
    Vote,
    /// A private message: each one lands in someone's inbox.
    Message,
    /// A picture upload: each one costs a decode and disk.
    Upload,
    Register,
    Login,
    Search,
    /// An activity a remote server sent to an inbox: counted per server.
    Federate,
}

impl Action {
    fn noun(self) -> &'static str {
        match self {
            Action::Post => "new topics and posts",
            Action::Edit => "edits",
            Action::Report => "reports",
            Action::Vote => "votes",
            Action::Message => "messages",
            Action::Upload => "uploads",
            Action::Register => "registrations",
            Action::Login => "login attempts",
            Action::Search => "searches",
            Action::Federate => "activities from one server",
        }
    }
}

/// Whose limit a request counts against besides its address.
pub enum Who<'a> {
    Nobody,
    User(i64),
    /// An account named in a login request, whether or not it exists, so
    /// guessing at a name costs the same as guessing at a password.
    Name(&'a str),
}

type Limiter<K> = DefaultKeyedRateLimiter<K>;

pub struct RateLimits {
    enabled: bool,
    real_ip_header: Option<HeaderName>,
    post_user: Limiter<i64>,
    post_ip: Limiter<IpAddr>,
    edit_user: Limiter<i64>,
    edit_ip: Limiter<IpAddr>,
    report_user: Limiter<i64>,
    report_ip: Limiter<IpAddr>,
    vote_user: Limiter<i64>,
    vote_ip: Limiter<IpAddr>,
    message_user: Limiter<i64>,
    upload_user: Limiter<i64>,
    register_ip: Limiter<IpAddr>,
    search_ip: Limiter<IpAddr>,
    login_user: Limiter<String>,
    login_ip: Limiter<IpAddr>,
    instance: Limiter<String>,
    checks: AtomicU64,
}

/// Forgotten keys are swept every this many checks, so a flood of new
/// addresses cannot grow the maps without bound between sweeps.
const SWEEP_EVERY: u64 = 4096;

fn quota(rate: Rate) -> Quota {
    let count = NonZeroU32::new(rate.count).unwrap_or(NonZeroU32::MIN);
    let each = (rate.per / count.get()).max(Duration::from_nanos(1));
    Quota::with_period(each).unwrap_or_else(|| Quota::per_second(count)).allow_burst(count)
}

impl RateLimits {
    pub fn new(cfg: &RateConfig) -> RateLimits {
        let header = cfg.real_ip_header.as_deref().and_then(|h| HeaderName::try_from(h.trim()).ok());
        if cfg.real_ip_header.is_some() && header.is_none() {
            tracing::warn!(header = ?cfg.real_ip_header, "--real-ip-header is not a valid header name; ignored");
        }
        RateLimits {
            enabled: cfg.enabled,
            real_ip_header: header,
            post_user: Limiter::keyed(quota(cfg.post_user)),
            post_ip: Limiter::keyed(quota(cfg.post_ip)),
            edit_user: Limiter::keyed(quota(cfg.edit_user)),
            edit_ip: Limiter::keyed(quota(cfg.edit_ip)),
            report_user: Limiter::keyed(quota(cfg.report_user)),
            report_ip: Limiter::keyed(quota(cfg.report_ip)),
            vote_user: Limiter::keyed(quota(cfg.vote_user)),
            vote_ip: Limiter::keyed(quota(cfg.vote_ip)),
            message_user: Limiter::keyed(quota(cfg.message_user)),
            upload_user: Limiter::keyed(quota(cfg.upload_user)),
            register_ip: Limiter::keyed(quota(cfg.register_ip)),
            search_ip: Limiter::keyed(quota(cfg.search_ip)),
            login_user: Limiter::keyed(quota(cfg.login_user)),
            login_ip: Limiter::keyed(quota(cfg.login_ip)),
            instance: Limiter::keyed(quota(cfg.instance)),
            checks: AtomicU64::new(0),
        }
    }

    /// Counts one `action` by `ip` (and `who`) and refuses it with 429 when
    /// it goes over a limit. The address is checked first: a flood from one
    /// address then cannot use up the bucket of the account it names.
    pub fn check(&self, action: Action, ip: ClientIp, who: Who<'_>) -> Result<(), AppError> {
        if !self.counting() {
            return Ok(());
        }
        let ip = ip.0;
        // A remote server's users share its address: it is counted by
        // `check_instance` instead, and each of its users by their account.
        let by_ip = |limiter: &Limiter<IpAddr>| if ip == ClientIp::FEDERATED.0 { None } else { wait(limiter, &ip) };
        let refused = match (action, who) {
            (Action::Post, who) => by_ip(&self.post_ip).or_else(|| by_user(&self.post_user, who)),
            (Action::Edit, who) => by_ip(&self.edit_ip).or_else(|| by_user(&self.edit_user, who)),
            (Action::Report, who) => by_ip(&self.report_ip).or_else(|| by_user(&self.report_user, who)),
            (Action::Vote, who) => by_ip(&self.vote_ip).or_else(|| by_user(&self.vote_user, who)),
            (Action::Message, who) => by_user(&self.message_user, who),
            (Action::Upload, who) => by_user(&self.upload_user, who),
            (Action::Register, _) => wait(&self.register_ip, &ip),
            (Action::Search, _) => wait(&self.search_ip, &ip),
            (Action::Login, Who::Name(name)) => {
                wait(&self.login_ip, &ip).or_else(|| wait(&self.login_user, &name.to_lowercase()))
            }
            (Action::Login, _) => wait(&self.login_ip, &ip),
            // Counted per server by `check_instance`, not per address.
            (Action::Federate, _) => None,
        };
        match refused {
            None => Ok(()),
            Some(after) => Err(AppError::TooManyRequests(action.noun(), after)),
        }
    }

    /// Counts one activity from the remote server `host` (its signer's,
    /// after the signature verified, so no one can spend another server's
    /// allowance) and refuses it with 429 over `--limit-federation-instance`.
    /// Remote servers retry a 429 later, so a flood is delayed, not lost.
    pub fn check_instance(&self, host: &str) -> Result<(), AppError> {
        if !self.counting() {
            return Ok(());
        }
        match wait(&self.instance, &host.to_ascii_lowercase()) {
            None => Ok(()),
            Some(after) => Err(AppError::TooManyRequests(Action::Federate.noun(), after)),
        }
    }

    /// Whether limits are enforced; counts the check, and sweeps
    /// forgotten keys every `SWEEP_EVERY` checks.
    fn counting(&self) -> bool {
        if self.enabled && self.checks.fetch_add(1, Ordering::Relaxed) % SWEEP_EVERY == SWEEP_EVERY - 1 {
            self.sweep();
        }
        self.enabled
    }

    fn sweep(&self) {
        self.post_user.retain_recent();
        self.post_ip.retain_recent();
        self.edit_user.retain_recent();
        self.edit_ip.retain_recent();
        self.report_user.retain_recent();
        self.report_ip.retain_recent();
        self.vote_user.retain_recent();
        self.vote_ip.retain_recent();
        self.message_user.retain_recent();
        self.upload_user.retain_recent();
        self.register_ip.retain_recent();
        self.search_ip.retain_recent();
        self.login_user.retain_recent();
        self.login_ip.retain_recent();
        self.instance.retain_recent();
    }

    /// `--real-ip-header`, when set to a valid header name.
    pub fn real_ip_header(&self) -> Option<&HeaderName> {
        self.real_ip_header.as_ref()
    }

    /// The client's address: the socket's peer, or the configured proxy
    /// header when it holds an address.
    fn client_ip(&self, parts: &Parts) -> IpAddr {
        let from_header = self.real_ip_header.as_ref().and_then(|name| {
            let value = parts.headers.get(name)?.to_str().ok()?;
            // A proxy appends the address it saw: the last entry is the one
            // no client can forge.
            value.rsplit(',').next()?.trim().parse::<IpAddr>().ok()
        });
        let peer = parts.extensions.get::<ConnectInfo<SocketAddr>>().map(|c| c.0.ip());
        from_header.or(peer).unwrap_or(IpAddr::from([0, 0, 0, 0]))
    }
}

fn by_user(limiter: &Limiter<i64>, who: Who<'_>) -> Option<Duration> {
    match who {
        Who::User(id) => wait(limiter, &id),
        _ => None,
    }
}

/// `None` when the request may go ahead, else how long to wait.
fn wait<K: std::hash::Hash + Eq + Clone>(limiter: &Limiter<K>, key: &K) -> Option<Duration> {
    limiter.check_key(key).err().map(|not_until| not_until.wait_time_from(DefaultClock::default().now()))
}

/// The address a request counts against. IPv6 clients are grouped by
/// their /64, which is what one household or server is usually given.
#[derive(Debug, Clone, Copy)]
pub struct ClientIp(pub IpAddr);

impl ClientIp {
    /// What an activity from another server (federation's inbox) counts
    /// as: not its server's address, which all of that server's users
    /// share. `::` is no client's address.
    pub const FEDERATED: ClientIp = ClientIp(IpAddr::V6(Ipv6Addr::UNSPECIFIED));

    fn grouped(ip: IpAddr) -> ClientIp {
        match ip {
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => ClientIp(IpAddr::V4(v4)),
                None => {
                    let s = v6.segments();
                    ClientIp(IpAddr::V6(Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0)))
                }
            },
            v4 => ClientIp(v4),
        }
    }
}

impl<S: Store> FromRequestParts<AppState<S>> for ClientIp {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, state: &AppState<S>) -> Result<Self, Self::Rejection> {
        Ok(ClientIp::grouped(state.limits.client_ip(parts)))
    }
}

/// Rate limits (docs/SECURITY.md): each is `COUNT/PERIOD`, a burst of COUNT
/// that refills one every PERIOD/COUNT. Over a limit the answer is 429 with
/// `Retry-After`.
#[derive(Debug, Clone, Args)]
pub struct RateConfig {
    /// Enforce the rate limits below ("false" for benchmarks and trusted networks).
    #[arg(long = "rate-limits", env = "PITH_RATE_LIMITS", default_value_t = true, action = clap::ArgAction::Set)]
    pub enabled: bool,

    /// New topics and posts per account.
    #[arg(long = "limit-post-user", env = "PITH_LIMIT_POST_USER", default_value = "10/1m", value_parser = Rate::parse)]
    pub post_user: Rate,

    /// New topics and posts per client address.
    #[arg(long = "limit-post-ip", env = "PITH_LIMIT_POST_IP", default_value = "30/1m", value_parser = Rate::parse)]
    pub post_ip: Rate,

    /// Edits of topic and post bodies per account (each renders Markdown again).
    #[arg(long = "limit-edit-user", env = "PITH_LIMIT_EDIT_USER", default_value = "20/1m", value_parser = Rate::parse)]
    pub edit_user: Rate,

    /// Edits of topic and post bodies per client address.
    #[arg(long = "limit-edit-ip", env = "PITH_LIMIT_EDIT_IP", default_value = "60/1m", value_parser = Rate::parse)]
    pub edit_ip: Rate,

    /// Reports to moderators per account.
    #[arg(long = "limit-report-user", env = "PITH_LIMIT_REPORT_USER", default_value = "20/1h", value_parser = Rate::parse)]
    pub report_user: Rate,

    /// Reports to moderators per client address.
    #[arg(long = "limit-report-ip", env = "PITH_LIMIT_REPORT_IP", default_value = "60/1h", value_parser = Rate::parse)]
    pub report_ip: Rate,

    /// Votes per account.
    #[arg(long = "limit-vote-user", env = "PITH_LIMIT_VOTE_USER", default_value = "60/1m", value_parser = Rate::parse)]
    pub vote_user: Rate,

    /// Votes per client address.
    #[arg(long = "limit-vote-ip", env = "PITH_LIMIT_VOTE_IP", default_value = "180/1m", value_parser = Rate::parse)]
    pub vote_ip: Rate,

    /// Private messages per account.
    #[arg(long = "limit-message-user", env = "PITH_LIMIT_MESSAGE_USER", default_value = "30/10m", value_parser = Rate::parse)]
    pub message_user: Rate,

    /// Picture uploads per account (each one is decoded and stored).
    #[arg(long = "limit-upload-user", env = "PITH_LIMIT_UPLOAD_USER", default_value = "20/10m", value_parser = Rate::parse)]
    pub upload_user: Rate,

    /// Registrations per client address.
    #[arg(long = "limit-register-ip", env = "PITH_LIMIT_REGISTER_IP", default_value = "5/1h", value_parser = Rate::parse)]
    pub register_ip: Rate,

    /// Searches per client address: a search of a common word costs a reader
    /// thread ~100 ms on a large forum, so it is rationed like a write.
    #[arg(long = "limit-search-ip", env = "PITH_LIMIT_SEARCH_IP", default_value = "60/1m", value_parser = Rate::parse)]
    pub search_ip: Rate,

    /// Login attempts per account name (brute-force defence).
    #[arg(long = "limit-login-user", env = "PITH_LIMIT_LOGIN_USER", default_value = "10/15m", value_parser = Rate::parse)]
    pub login_user: Rate,

    /// Login attempts per client address.
    #[arg(long = "limit-login-ip", env = "PITH_LIMIT_LOGIN_IP", default_value = "30/15m", value_parser = Rate::parse)]
    pub login_ip: Rate,

    /// Activities per remote server (federation's inboxes, counted by the
    /// host of the key that signed them).
    #[arg(long = "limit-federation-instance", env = "PITH_LIMIT_FEDERATION_INSTANCE", default_value = "1200/1m", value_parser = Rate::parse)]
    pub instance: Rate,

    /// Header that carries the client's address when Pith runs behind a
    /// reverse proxy (`X-Forwarded-For`: its last entry; `X-Real-IP`).
    /// Unset: the socket's peer address. Never set it without a proxy that
    /// overwrites the header, or clients can pick their own address.
    #[arg(long = "real-ip-header", env = "PITH_REAL_IP_HEADER")]
    pub real_ip_header: Option<String>,
}

impl RateConfig {
    /// Every limit off: for tests and benchmarks that must not be throttled.
    pub fn off() -> RateConfig {
        RateConfig { enabled: false, ..RateConfig::default() }
    }
}

impl Default for RateConfig {
    fn default() -> Self {
        let rate = |s: &str| Rate::parse(s).unwrap_or(Rate { count: 1, per: Duration::from_secs(1) });
        RateConfig {
            enabled: true,
            post_user: rate("10/1m"),
            post_ip: rate("30/1m"),
            edit_user: rate("20/1m"),
            edit_ip: rate("60/1m"),
            report_user: rate("20/1h"),
            report_ip: rate("60/1h"),
            vote_user: rate("60/1m"),
            vote_ip: rate("180/1m"),
            message_user: rate("30/10m"),
            upload_user: rate("20/10m"),
            register_ip: rate("5/1h"),
            search_ip: rate("60/1m"),
            login_user: rate("10/15m"),
            login_ip: rate("30/15m"),
            instance: rate("1200/1m"),
            real_ip_header: None,
        }
    }
}

/// `COUNT/PERIOD`, such as `10/1m`: a burst of COUNT, then one more every
/// PERIOD/COUNT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    pub count: u32,
    pub per: Duration,
}

impl Rate {
    pub fn parse(s: &str) -> Result<Rate, String> {
        let bad = |why: &str| format!("{s:?} is not a rate like 10/1m (COUNT/PERIOD): {why}");
        let (count, per) = s.split_once('/').ok_or_else(|| bad("no '/'"))?;
        let count: u32 = count.trim().parse().map_err(|_| bad("the count must be a whole number"))?;
        if !(1..=1_000_000).contains(&count) {
            return Err(bad("the count must be between 1 and 1000000"));
        }
        Ok(Rate { count, per: parse_interval(per).map_err(|e| bad(&e))? })
    }
}

impl std::fmt::Display for Rate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}s", self.count, self.per.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(rate: &str) -> RateLimits {
        let r = Rate::parse(rate).expect("rate");
        RateLimits::new(&RateConfig {
            post_user: r,
            post_ip: Rate { count: 1000, per: Duration::from_secs(1) },
            login_user: r,
            login_ip: Rate { count: 1000, per: Duration::from_secs(1) },
            ..RateConfig::default()
        })
    }

    #[test]
    fn a_burst_passes_then_the_next_is_refused_with_a_wait() {
        let l = limits("3/1m");
        let ip = ClientIp(IpAddr::from([10, 0, 0, 1]));
        for _ in 0..3 {
            assert!(l.check(Action::Post, ip, Who::User(1)).is_ok());
        }
        match l.check(Action::Post, ip, Who::User(1)) {
            Err(AppError::TooManyRequests(_, after)) => {
                assert!(after > Duration::from_secs(15) && after <= Duration::from_secs(20), "{after:?}")
            }
            other => panic!("expected 429, got {other:?}"),
        }
        // Another account is not affected.
        assert!(l.check(Action::Post, ip, Who::User(2)).is_ok());
    }

    #[test]
    fn edits_have_their_own_bucket_apart_from_posts() {
        let l = RateLimits::new(&RateConfig { edit_user: Rate::parse("2/1m").expect("rate"), ..RateConfig::default() });
        let ip = ClientIp(IpAddr::from([10, 0, 0, 1]));
        assert!(l.check(Action::Edit, ip, Who::User(1)).is_ok());
        assert!(l.check(Action::Edit, ip, Who::User(1)).is_ok());
        assert!(matches!(l.check(Action::Edit, ip, Who::User(1)), Err(AppError::TooManyRequests("edits", _))));
        assert!(l.check(Action::Post, ip, Who::User(1)).is_ok(), "posting is counted apart");
        assert!(l.check(Action::Edit, ip, Who::User(2)).is_ok(), "another account is not affected");
    }

    #[test]
    fn login_names_count_case_insensitively() {
        let l = limits("2/1m");
        let ip = ClientIp(IpAddr::from([10, 0, 0, 1]));
        assert!(l.check(Action::Login, ip, Who::Name("Alice")).is_ok());
        assert!(l.check(Action::Login, ip, Who::Name("alice")).is_ok());
        assert!(l.check(Action::Login, ip, Who::Name("ALICE")).is_err());
    }

    #[test]
    fn disabled_limits_refuse_nothing() {
        let l = RateLimits::new(&RateConfig::off());
        let ip = ClientIp(IpAddr::from([10, 0, 0, 1]));
        for _ in 0..100 {
            assert!(l.check(Action::Register, ip, Who::Nobody).is_ok());
        }
    }

    #[test]
    fn ipv6_clients_share_their_slash_64() {
        let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().expect("ip");
        let b: IpAddr = "2001:db8:1:2:bbbb::9".parse().expect("ip");
        let mapped: IpAddr = "::ffff:192.0.2.7".parse().expect("ip");
        assert_eq!(ClientIp::grouped(a).0, ClientIp::grouped(b).0);
        assert_eq!(ClientIp::grouped(mapped).0, IpAddr::from([192, 0, 2, 7]));
    }
}
