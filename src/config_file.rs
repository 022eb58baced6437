//! The TOML config file and the effective configuration. The file's keys
//! are the long flag names of `pith serve`; its values become clap defaults
//! before the real parse, so the precedence is flag > environment > file >
//! built-in default with no second list of settings to keep in step.
//! `ArgMatches::value_source` then tells where each value came from, which
//! `pith config` prints and `pith serve` logs at start.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::parser::ValueSource;
use clap::{ArgMatches, Command as ClapCommand, CommandFactory, FromArgMatches};

use clap::{Args, Parser, Subcommand};

use crate::config::{
    BackupConfig, MediaGcConfig, RestoreConfig, SeedConfig, ServeConfig, Setting, UserAddConfig, UserDeleteConfig,
    UserInviteConfig, UserResetLinkConfig, UserTokenConfig,
};

/// The subcommands that take `pith serve`'s settings.
const SERVE_LIKE: [&str; 2] = ["serve", "config"];
/// Arguments of those subcommands that are not settings.
const NOT_SETTINGS: [&str; 5] = ["help", "version", "json", "template", "config"];

#[derive(Debug, Parser)]
#[command(name = "pith", version, about = "A Reddit-style forum that fits on a Raspberry Pi")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,

    #[command(flatten)]
    pub log: crate::logging::LogConfig,
}

#[derive(Debug, Subcommand)]
// Parsed once at start-up: the size of the serve variant costs nothing.
#[allow(clippy::large_enum_variant)]
pub enum Command {
    /// Run the forum server.
    Serve(ServeConfig),
    /// Fill a database with a deterministic benchmark data set.
    Seed(SeedConfig),
    /// Manage user accounts.
    User {
        #[command(subcommand)]
        command: UserCommand,
    },
    /// Load generators and reference servers for benchmarks.
    Bench(crate::bench::BenchArgs),
    /// Copy the database to FILE while the server keeps running (a
    /// consistent, checked snapshot).
    Backup(BackupConfig),
    /// Replace the database with a backup (stop `pith serve` first; the
    /// replaced database is kept beside it).
    Restore(RestoreConfig),
    /// Print the effective configuration of `pith serve` (same flags,
    /// environment and config file): every setting, its value and where it
    /// came from.
    Config(ConfigShowConfig),
    /// Copy a whole forum between SQLite and PostgreSQL, verified by counts
    /// and checksums (stop the source server first).
    Migrate(crate::migrate::MigrateConfig),
    /// Block or allow other servers (federation); list the rules.
    Federation {
        #[command(subcommand)]
        command: crate::instances::FederationCommand,
    },
    /// Look after the stored pictures.
    Media {
        #[command(subcommand)]
        command: MediaCommand,
    },
}

#[derive(Debug, Subcommand)]
pub enum MediaCommand {
    /// Bring the pictures' files and rows back in step: remove freed
    /// pictures, files with no row and crash leftovers, forget rows whose
    /// file is missing, and print what was found.
    Gc(MediaGcConfig),
}

#[derive(Debug, Clone, Args)]
pub struct ConfigShowConfig {
    /// Print JSON: `{"NAME": {"value", "source", "from"}}`.
    #[arg(long)]
    pub json: bool,

    /// Print a config file with every setting commented out at its
    /// built-in default, each under its help text (the Debian package's
    /// /etc/pith/pith.toml is this).
    #[arg(long, conflicts_with = "json")]
    pub template: bool,

    #[command(flatten)]
    pub serve: ServeConfig,
}

#[derive(Debug, Subcommand)]
pub enum UserCommand {
    /// Create a user; prints a new API token as the last line of stdout.
    Add(UserAddConfig),
    /// Issue a new API token to an existing user (their other sessions and
    /// tokens stay); prints it as the last line of stdout.
    Token(UserTokenConfig),
    /// Create a one-use invite code for registration by invitation; prints
    /// the code as the last line of stdout.
    Invite(UserInviteConfig),
    /// Make a one-use password-reset link for a user (valid one hour), for
    /// an administrator to hand over when the forum sends no mail; prints
    /// it as the last line of stdout.
    ResetLink(UserResetLinkConfig),
    /// Delete an account (its sessions, inbox, saves and votes' record go;
    /// its name stays reserved), keeping its content under no name or
    /// removing it.
    Delete(UserDeleteConfig),
}
/// A loaded config file: its path and its settings as strings.
struct File {
    path: PathBuf,
    values: Vec<(String, String)>,
}

/// Removes every `PITH_*` variable that is set but empty, and returns their
/// names: an empty value means "not set" (as `VAR= pith serve` or a blank
/// line in an env file intend), so its default applies rather than an
/// "invalid value ''" that would stop start-up. Call it first thing in
/// `main`, before any thread exists.
pub fn ignore_empty_env() -> Vec<String> {
    let empty: Vec<String> = std::env::vars_os()
        .filter(|(_, value)| value.is_empty())
        .filter_map(|(key, _)| key.into_string().ok())
        .filter(|key| key.starts_with("PITH_"))
        .collect();
    for key in &empty {
        // SAFETY: called at the start of `main`, while the process has one
        // thread, so nothing reads the environment concurrently.
        unsafe { std::env::remove_var(key) };
    }
    empty
}

/// Parses the process's arguments with the config file as defaults. Clap's
/// own errors (and `--help`) exit as usual; a bad file is an error.
pub fn parse() -> anyhow::Result<Cli> {
    parse_from(std::env::args_os().collect())
}

pub fn parse_from(args: Vec<OsString>) -> anyhow::Result<Cli> {
    let base = Cli::command();
    // A first pass finds the file; when it fails, the real parse below
    // reports the same error.
    let file = match base.clone().try_get_matches_from(&args) {
        Ok(m) => match serve_matches(&m) {
            Some(sm) => load(sm)?,
            None => None,
        },
        Err(_) => None,
    };
    let mut cmd = base;
    if let Some(file) = &file {
        for name in SERVE_LIKE {
            let sub = cmd.find_subcommand(name).cloned().context("no such subcommand")?;
            let sub = with_file_defaults(sub, file)?;
            cmd = cmd.mut_subcommand(name, |_| sub);
        }
    }
    let matches = cmd.try_get_matches_from(&args).unwrap_or_else(|e| e.exit());
    let mut cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    if let (Some(sm), Some(serve)) = (serve_matches(&matches), serve_config(&mut cli.command)) {
        let sub = Cli::command().find_subcommand("serve").cloned().context("no serve subcommand")?;
        serve.effective = effective(&sub, sm, file.as_ref());
        size_from_machine(serve, &crate::machine::Machine::detect());
    }
    Ok(cli)
}

fn serve_matches(m: &ArgMatches) -> Option<&ArgMatches> {
    m.subcommand().filter(|(name, _)| SERVE_LIKE.contains(name)).map(|(_, sm)| sm)
}

fn serve_config(cmd: &mut Command) -> Option<&mut ServeConfig> {
    match cmd {
        Command::Serve(cfg) => Some(cfg),
        Command::Config(c) => Some(&mut c.serve),
        _ => None,
    }
}

/// The file named by `--config`/`PITH_CONFIG` (which must exist), else
/// `pith.toml` in the data dir when it exists.
fn load(m: &ArgMatches) -> anyhow::Result<Option<File>> {
    let (path, explicit) = match m.get_one::<PathBuf>("config") {
        Some(p) => (p.clone(), true),
        None => match m.get_one::<PathBuf>("data_dir") {
            Some(dir) => (dir.join("pith.toml"), false),
            None => return Ok(None),
        },
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        // No default file: also when the data dir is missing or not a
        // directory, which opening the database reports better.
        Err(e) if !explicit && matches!(e.kind(), std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory) => {
            return Ok(None);
        }
        Err(e) => return Err(e).with_context(|| format!("cannot read the config file {}", path.display())),
    };
    let values = parse_toml(&path, &text)?;
    Ok(Some(File { path, values }))
}

fn parse_toml(path: &Path, text: &str) -> anyhow::Result<Vec<(String, String)>> {
    let table: toml::Table =
        toml::from_str(text).map_err(|e| anyhow::anyhow!("{}: not valid TOML: {e}", path.display()))?;
    table
        .into_iter()
        .map(|(key, value)| {
            let text = match value {
                toml::Value::String(s) => s,
                toml::Value::Integer(i) => i.to_string(),
                toml::Value::Float(f) => f.to_string(),
                toml::Value::Boolean(b) => b.to_string(),
                _ => anyhow::bail!("{}: `{key}` must be a string, a number or a boolean", path.display()),
            };
            Ok((key, text))
        })
        .collect()
}

/// `sub` with the file's values as its defaults; an unknown key or a value
/// the flag would refuse is an error naming the file and the key.
fn with_file_defaults(mut sub: ClapCommand, file: &File) -> anyhow::Result<ClapCommand> {
    let shown = file.path.display();
    for (key, value) in &file.values {
        let arg = sub
            .get_arguments()
            .find(|a| a.get_long() == Some(key.as_str()) && !NOT_SETTINGS.contains(&key.as_str()))
            .cloned()
            .with_context(|| {
                format!("{shown}: unknown setting `{key}` (keys are the long flag names of `pith serve`, such as `listen` or `cache-mb`)")
            })?;
        // Checked alone, with no environment, so the error is the file's.
        let alone = ClapCommand::new("check").no_binary_name(true).arg(arg.clone().env(None::<&'static str>));
        if let Err(e) = alone.try_get_matches_from([format!("--{key}={value}")]) {
            let why = e.render().to_string();
            let why = why.lines().next().unwrap_or_default().trim_start_matches("error: ");
            anyhow::bail!("{shown}: bad value for `{key}`: {why}");
        }
        let id = arg.get_id().clone();
        sub = sub.mut_arg(id, |a| a.default_value(value.clone()));
    }
    Ok(sub)
}

/// Every setting of `sub` as `m` has it, with its source.
fn effective(sub: &ClapCommand, m: &ArgMatches, file: Option<&File>) -> Vec<Setting> {
    let from_file = |name: &str| file.filter(|f| f.values.iter().any(|(k, _)| k == name));
    sub.get_arguments()
        .filter_map(|arg| {
            let name = arg.get_long()?;
            if matches!(name, "help" | "version" | "json" | "template") {
                return None;
            }
            let id = arg.get_id().as_str();
            let value = m.get_raw(id).map(|vals| {
                let joined = vals.map(|v| v.to_string_lossy().into_owned()).collect::<Vec<_>>().join(",");
                mask(name, &joined)
            });
            // The default file, when one was found, is the `config` in use.
            let value = value.or_else(|| file.filter(|_| name == "config").map(|f| f.path.display().to_string()));
            let (source, from) = match m.value_source(id) {
                Some(ValueSource::CommandLine) => ("flag", Some(format!("--{name}"))),
                Some(ValueSource::EnvVariable) => ("env", arg.get_env().map(|v| v.to_string_lossy().into_owned())),
                _ => match from_file(name) {
                    Some(f) => ("file", Some(f.path.display().to_string())),
                    None => ("default", None),
                },
            };
            Some(Setting { name: name.to_owned(), value, source, from })
        })
        .collect()
}

/// The settings left at their defaults that the machine sizes
/// (`crate::machine`): their values become the rule's, with the source
/// `auto` and the machine (and `--memory-mb`, when set) as their origin.
pub fn size_from_machine(serve: &mut ServeConfig, machine: &crate::machine::Machine) {
    use crate::machine::Sizing;
    let budget = serve.memory_mb.unwrap_or_else(|| Sizing::default_budget_mb(machine));
    let s = Sizing::from(machine, budget);
    let origin = match serve.memory_mb {
        Some(mb) => format!("--memory-mb {mb} on {}", machine.describe()),
        None => machine.describe(),
    };
    let settings = &mut serve.effective;
    let mut auto = |name: &str, value: String| match settings.iter_mut().find(|x| x.name == name) {
        // Built in code (tests), with no sources: nothing is auto.
        None => false,
        Some(set) if set.source != "default" => false,
        Some(set) => {
            *set = Setting { name: name.to_owned(), value: Some(value), source: "auto", from: Some(origin.clone()) };
            true
        }
    };
    if auto("memory-mb", s.memory_mb.to_string()) {
        serve.memory_mb = Some(s.memory_mb);
    }
    if auto("cache-mb", s.cache_mb.to_string()) {
        serve.cache.cache_mb = s.cache_mb;
    }
    if auto("readers", s.readers.to_string()) {
        serve.store.readers = s.readers;
    }
    if auto("max-connections", s.max_connections.to_string()) {
        serve.net.max_connections = s.max_connections;
    }
    if auto("live-max-sockets", s.live_max_sockets.to_string()) {
        serve.live.max_sockets = s.live_max_sockets;
    }
    if auto("live-max-pending-total-mb", s.live_max_pending_total_mb.to_string()) {
        serve.live.max_pending_total_mb = s.live_max_pending_total_mb;
    }
}

/// Hides secrets: values of settings named like one, and the password in a
/// URL's `user:password@`.
fn mask(name: &str, value: &str) -> String {
    if ["password", "secret", "token"].iter().any(|s| name.contains(s)) {
        return "(hidden)".into();
    }
    crate::settings::mask_password(value, "(hidden)")
}

/// `pith config`: the table, JSON keyed by setting, or the template.
pub fn show(cfg: &ConfigShowConfig) -> anyhow::Result<()> {
    let mut text = String::new();
    let settings = &cfg.serve.effective;
    if cfg.template {
        text = template()?;
    } else if cfg.json {
        let map: BTreeMap<&str, &Setting> = settings.iter().map(|s| (s.name.as_str(), s)).collect();
        text = serde_json::to_string_pretty(&map)? + "\n";
    } else {
        let width = settings.iter().map(|s| s.name.len()).max().unwrap_or(0);
        for s in settings {
            let value = s.value.as_deref().unwrap_or("(unset)");
            text.push_str(&format!("{:width$}  {value}  [{}]\n", s.name, s.source_text()));
        }
    }
    write_out(&text)
}

/// A TOML file of every `pith serve` setting, commented out: its help,
/// then `#key = default` (a string quoted, as the file needs it). A
/// setting sized from the machine, or with no default, has no value after
/// its `=`.
pub fn template() -> anyhow::Result<String> {
    let serve = Cli::command().find_subcommand("serve").cloned().context("no serve subcommand")?;
    let mut text = String::from(
        "# Pith's settings (`pith serve`), each at its built-in default. Uncomment a line to set it;\n\
         # the environment (PITH_*) and flags override this file. `pith config` shows every\n\
         # setting in effect and where it came from.\n",
    );
    for arg in serve.get_arguments() {
        let Some(name) = arg.get_long() else { continue };
        if NOT_SETTINGS.contains(&name) {
            continue;
        }
        let help = arg.get_long_help().or(arg.get_help()).map(|h| h.to_string()).unwrap_or_default();
        text.push('\n');
        for line in help.lines().flat_map(|l| wrap(l, 88)) {
            text.push_str(format!("# {line}").trim_end());
            text.push('\n');
        }
        if let Some(env) = arg.get_env() {
            text.push_str(&format!("# (environment: {})\n", env.to_string_lossy()));
        }
        let default: Vec<String> = arg.get_default_values().iter().map(|v| v.to_string_lossy().into_owned()).collect();
        // An auto-sized setting's built-in default differs by machine
        // (the readers follow the cores): the template names none.
        let value = match () {
            _ if AUTO_SIZED.contains(&name) => "# auto: sized from this machine (docs/DEPLOY.md) unless set".into(),
            _ if default.is_empty() => String::new(),
            _ => toml_value(&default.join(",")),
        };
        text.push_str(format!("#{name} = {value}").trim_end());
        text.push('\n');
    }
    Ok(text)
}

/// `line` cut at spaces into lines of at most `width` characters (a
/// longer word stands alone).
fn wrap(line: &str, width: usize) -> Vec<String> {
    let mut out = vec![String::new()];
    for word in line.split(' ') {
        let last = out.last_mut().expect("never empty");
        if !last.is_empty() && last.len() + 1 + word.len() > width {
            out.push(word.to_owned());
        } else {
            if !last.is_empty() {
                last.push(' ');
            }
            last.push_str(word);
        }
    }
    out
}

/// The settings `size_from_machine` fills in when they are left unset.
const AUTO_SIZED: [&str; 6] =
    ["memory-mb", "cache-mb", "readers", "max-connections", "live-max-sockets", "live-max-pending-total-mb"];

/// A default as TOML: numbers and booleans bare, anything else quoted.
fn toml_value(v: &str) -> String {
    if v == "true" || v == "false" || (!v.is_empty() && v.parse::<f64>().is_ok() && !v.starts_with('+')) {
        v.to_owned()
    } else {
        // A JSON string is a TOML basic string: the same quotes and escapes.
        serde_json::Value::String(v.to_owned()).to_string()
    }
}

/// Writes to stdout; a reader that stopped early (`pith config | head`)
/// is not an error, where `println!` would panic on the broken pipe.
fn write_out(text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_in_a_database_url_is_hidden() {
        assert_eq!(mask("database", "postgres://pith:s3cret@db/pith"), "postgres://pith:(hidden)@db/pith");
        assert_eq!(mask("database", "sqlite:/var/lib/pith/pith.db"), "sqlite:/var/lib/pith/pith.db");
        assert_eq!(mask("admin-password", "x"), "(hidden)");
    }
}
