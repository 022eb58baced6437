//! `pith federation`: the administrators' rules for other servers
//! (`app::federation::instances`), set and listed from the command line
//! against the database, whether or not a server runs (a running one
//! reads them again within `instances::REFRESH`).

use clap::{Args, Subcommand};

use crate::app::federation::instances::store_rule;
use crate::backup::{with_postgres, with_sqlite};
use crate::config::{Backend, DataConfig};
use crate::model::instances::{InstanceEntry, InstanceRule};
use crate::store::Store;

#[derive(Debug, Subcommand)]
pub enum FederationCommand {
    /// Refuse a server and its subdomains: its activities are answered
    /// 403, nothing is fetched from or delivered to it.
    Block(RuleConfig),
    /// Allow a server; once any is allowed, only allowed servers federate.
    Allow(RuleConfig),
    /// Remove the rule for a server.
    Clear(HostConfig),
    /// List the rules.
    List(ListConfig),
}

#[derive(Debug, Clone, Args)]
pub struct RuleConfig {
    /// The server's host name, e.g. lemmy.example (no scheme, no port).
    pub host: String,

    /// Why, for the other administrators (shown in `list` and on /admin/federation).
    #[arg(long, default_value = "")]
    pub reason: String,

    #[command(flatten)]
    pub data: DataConfig,
}

#[derive(Debug, Clone, Args)]
pub struct HostConfig {
    /// The server's host name.
    pub host: String,

    #[command(flatten)]
    pub data: DataConfig,
}

#[derive(Debug, Clone, Args)]
pub struct ListConfig {
    #[command(flatten)]
    pub data: DataConfig,
}

pub fn main(command: FederationCommand) -> anyhow::Result<()> {
    let (cfg, rule) = match command {
        FederationCommand::Block(cfg) => (cfg, Some(InstanceRule::Block)),
        FederationCommand::Allow(cfg) => (cfg, Some(InstanceRule::Allow)),
        FederationCommand::Clear(cfg) => (RuleConfig { host: cfg.host, reason: String::new(), data: cfg.data }, None),
        FederationCommand::List(cfg) => {
            let rules = match cfg.data.backend() {
                Backend::Sqlite(_) => with_sqlite(&cfg.data, |s| async move { Ok(s.instance_rules().await?) })?,
                Backend::Postgres(url) => with_postgres(&url, |s| async move { Ok(s.instance_rules().await?) })?,
            };
            print!("{}", listing(&rules));
            return Ok(());
        }
    };
    let RuleConfig { host, reason, data } = cfg;
    let (host, had) = match data.backend() {
        Backend::Sqlite(_) => with_sqlite(&data, |s| set(s, host, rule, reason))?,
        Backend::Postgres(url) => with_postgres(&url, |s| set(s, host, rule, reason))?,
    };
    match (rule, had) {
        (Some(rule), _) => println!("{host}: {}", rule.as_str()),
        (None, true) => println!("{host}: rule removed"),
        (None, false) => anyhow::bail!("{host} has no rule"),
    }
    Ok(())
}

async fn set<S: Store>(
    store: std::sync::Arc<S>,
    host: String,
    rule: Option<InstanceRule>,
    reason: String,
) -> anyhow::Result<(String, bool)> {
    store_rule(&*store, &host, rule, &reason).await.map_err(|e| anyhow::anyhow!("{e}"))
}

/// The rules as `pith federation list` prints them: host, rule, since
/// (UTC date), reason; a line saying so when there are none.
pub fn listing(rules: &[InstanceEntry]) -> String {
    if rules.is_empty() {
        return "no rules: every server may federate\n".into();
    }
    let width = rules.iter().map(|r| r.host.len()).max().unwrap_or(0);
    let mut out = String::new();
    for r in rules {
        let since = r.created_at.rfc3339();
        out.push_str(&format!("{:width$}  {:5}  {since}  {}\n", r.host, r.rule.as_str(), r.reason));
    }
    if rules.iter().any(|r| r.rule == InstanceRule::Allow) {
        out.push_str("(allowlist: servers not allowed above may not federate)\n");
    }
    out
}
