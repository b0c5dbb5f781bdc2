//! `cellar shell`: an HBase-shell-like console over Cellar's native protocol.
//!
//! `parser` reads the Ruby-literal command syntax, `cellar_model::parse_filter` HBase's filter strings,
//! `commands` turns commands into requests, `exec` runs them and prints HBase-style output
//! through `format`, and `repl` feeds commands from `-e`, piped input or the line editor.

mod client;
mod commands;
mod exec;
#[cfg(test)]
mod fake;
mod format;
mod parser;
mod repl;

use std::io::IsTerminal;

#[derive(clap::Args)]
pub struct Args {
    /// The server's native address.
    #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:16200")]
    pub connect: String,
    /// Run these commands (separated by ';' or newlines) and exit; a failing command stops
    /// the script and makes the exit status non-zero.
    #[arg(short = 'e', long, value_name = "COMMANDS")]
    pub execute: Option<String>,
    #[command(flatten)]
    pub tls: crate::tls_args::ClientTlsArgs,
    /// The user to say you are to a server that takes your word (no client certificate;
    /// `security.simple_users`) [default: $USER].
    #[arg(long, value_name = "NAME")]
    pub user: Option<String>,
}

pub fn run(args: Args) -> Result<(), String> {
    let config = cellar_client::ClientConfig {
        tls: args.tls.config()?,
        user: args
            .user
            .or_else(|| std::env::var("USER").ok())
            .filter(|u| !u.is_empty()),
        ..cellar_client::ClientConfig::default()
    };
    let mut cluster = client::RemoteCluster::new(args.connect, config);
    if let Some(script) = args.execute {
        let stdout = std::io::stdout();
        return repl::run_script(
            &mut cluster,
            &script,
            &mut stdout.lock(),
            &mut std::io::stderr(),
        );
    }
    let stdin = std::io::stdin();
    if stdin.is_terminal() {
        repl::run_interactive(&mut cluster)
    } else {
        let stdout = std::io::stdout();
        repl::run_reader(
            &mut cluster,
            &mut stdin.lock(),
            &mut stdout.lock(),
            &mut std::io::stderr(),
        )
    }
}
