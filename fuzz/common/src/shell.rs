//! The shell's command parser, compiled from the cli crate's own source file (`#[path]`): the
//! cli crate is a binary only, and the file depends on nothing of it (std, `bytes`,
//! `cellar_model`), so including it changes nothing in the cli crate. (The filter language
//! lives in `cellar_model::parse_filter`.)

#[allow(dead_code)]
#[path = "../../../crates/cli/src/shell/parser.rs"]
pub mod parser;
