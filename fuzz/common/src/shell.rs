//! The shell's two parsers, compiled from the cli crate's own source files (`#[path]`): the
//! cli crate is a binary only, and both files depend on nothing of it (std, `bytes`,
//! `cellar_model`), so including them changes nothing in the cli crate.

#[allow(dead_code)]
#[path = "../../../crates/cli/src/shell/parser.rs"]
pub mod parser;

#[allow(dead_code)]
#[path = "../../../crates/cli/src/shell/filter_lang.rs"]
pub mod filter_lang;
