//! `cellar shell`: an HBase-shell-like console over Cellar's native protocol.
//!
//! `parser` reads the Ruby-literal command syntax, `filter_lang` HBase's filter strings,
//! `commands` turns commands into requests, `exec` runs them and prints HBase-style output
//! through `format`, and `repl` feeds commands from `-e`, piped input or the line editor.

mod commands;
mod exec;
#[cfg(test)]
mod fake;
mod filter_lang;
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
}

pub fn run(args: Args) -> Result<(), String> {
    let _ = (&args.connect, std::io::stdin().is_terminal());
    Err("cellar shell is not built yet".into())
}
