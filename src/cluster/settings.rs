//! The cluster settings: which bus, and this node's name on it.

use clap::Args;

#[derive(Debug, Clone, Args)]
pub struct ClusterConfig {
    /// How nodes sharing one database tell each other about writes: `auto`
    /// (PostgreSQL LISTEN/NOTIFY when the database is PostgreSQL, else
    /// none), `none`, `postgres`, or `nats://HOST:PORT`.
    #[arg(long = "bus", env = "PITH_BUS", default_value = "auto")]
    pub bus: String,

    /// This node's id on the bus; empty: a random one at each start.
    #[arg(long = "node-id", env = "PITH_NODE_ID", default_value = "")]
    pub node_id: String,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig { bus: "auto".into(), node_id: String::new() }
    }
}

/// The resolved bus.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bus {
    None,
    /// LISTEN/NOTIFY on this database URL.
    Postgres(String),
    /// A NATS server URL.
    Nats(String),
}

impl Bus {
    /// Resolves `--bus` against the database URL (`None`: SQLite).
    pub fn resolve(setting: &str, database: Option<&str>) -> Result<Bus, String> {
        let pg = database.filter(|d| crate::settings::is_postgres_url(d)).map(str::to_owned);
        match setting.trim() {
            "" | "auto" => Ok(pg.map_or(Bus::None, Bus::Postgres)),
            "none" => Ok(Bus::None),
            "postgres" => pg.map(Bus::Postgres).ok_or_else(|| {
                "--bus postgres needs a PostgreSQL database (--database postgres://...); with SQLite there is one node and no bus".to_owned()
            }),
            url if url.starts_with("nats://") => Ok(Bus::Nats(url.to_owned())),
            other => Err(format!("--bus {other:?}: expected auto, none, postgres or nats://HOST:PORT")),
        }
    }

    /// For the start-up log (no credentials).
    pub fn describe(&self) -> String {
        match self {
            Bus::None => "none".into(),
            Bus::Postgres(_) => "postgres (LISTEN/NOTIFY on the database)".into(),
            Bus::Nats(url) => format!("nats ({})", crate::settings::redact_url(url)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_picks_postgres_only_for_a_postgres_database() {
        let pg = Some("postgres://h/db");
        assert_eq!(Bus::resolve("auto", pg), Ok(Bus::Postgres("postgres://h/db".into())));
        assert_eq!(Bus::resolve("auto", None), Ok(Bus::None));
        assert_eq!(Bus::resolve("auto", Some("sqlite:x.db")), Ok(Bus::None));
        assert_eq!(Bus::resolve("none", pg), Ok(Bus::None));
        assert_eq!(Bus::resolve("nats://127.0.0.1:4222", None), Ok(Bus::Nats("nats://127.0.0.1:4222".into())));
    }

    #[test]
    fn a_postgres_bus_without_postgres_or_a_bad_value_is_refused_clearly() {
        assert!(Bus::resolve("postgres", None).expect_err("refused").contains("PostgreSQL"));
        assert!(Bus::resolve("redis://x", None).expect_err("refused").contains("expected auto"));
    }
}
