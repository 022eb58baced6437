//! The `pith` binary: parse the command line, start logging, dispatch.
//! Everything else lives in the library so tests and `bench` reuse it.

use clap::Parser;
use pith::config::{Cli, Command, UserCommand};

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_env("PITH_LOG").unwrap_or_else(|_| "info".into()))
        .with_writer(std::io::stderr)
        .init();
    let result = match cli.command {
        Command::Serve(cfg) => pith::serve::main(cfg),
        Command::Seed(cfg) => pith::seed::main(cfg),
        Command::User { command: UserCommand::Add(cfg) } => pith::users::add(cfg),
        Command::User { command: UserCommand::Invite(cfg) } => pith::users::invite(cfg),
        Command::Bench(args) => pith::bench::main(args),
        Command::Backup(cfg) => pith::backup::backup(cfg),
        Command::Restore(cfg) => pith::backup::restore(cfg),
        Command::Migrate(cfg) => pith::migrate::main(cfg),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pith: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
