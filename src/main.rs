//! The `pith` binary: parse the command line, start logging, dispatch.
//! Everything else lives in the library so tests and `bench` reuse it.

use pith::config_file::{Command, MediaCommand, UserCommand};

fn main() -> std::process::ExitCode {
    let ignored = pith::config_file::ignore_empty_env();
    // Flags, environment and the config file (see `config_file`).
    let cli = match pith::config_file::parse() {
        Ok(cli) => cli,
        Err(e) => {
            eprintln!("pith: {e:#}");
            return std::process::ExitCode::from(2);
        }
    };
    pith::logging::init(&cli.log);
    if !ignored.is_empty() {
        tracing::warn!(
            variables = ignored.join(" "),
            "empty settings in the environment ignored: their defaults apply"
        );
    }
    if matches!(cli.command, Command::Serve(_)) {
        pith::logging::log_settings(&cli.log);
    }
    let result = match cli.command {
        Command::Serve(cfg) => pith::serve::main(cfg),
        Command::Seed(cfg) => pith::seed::main(cfg),
        Command::User { command: UserCommand::Add(cfg) } => pith::users::add(cfg),
        Command::User { command: UserCommand::Token(cfg) } => pith::users::token(cfg),
        Command::User { command: UserCommand::Invite(cfg) } => pith::users::invite(cfg),
        Command::User { command: UserCommand::ResetLink(cfg) } => pith::users::reset_link(cfg),
        Command::User { command: UserCommand::Delete(cfg) } => pith::users::delete(cfg),
        Command::Bench(args) => pith::bench::main(args),
        Command::Backup(cfg) => pith::backup::backup(cfg),
        Command::Restore(cfg) => pith::backup::restore(cfg),
        Command::Config(cfg) => pith::config_file::show(&cfg),
        Command::Migrate(cfg) => pith::migrate::main(cfg),
        Command::Media { command: MediaCommand::Gc(cfg) } => pith::backup::media_gc(cfg),
        Command::Federation { command } => pith::instances::main(command),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pith: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
