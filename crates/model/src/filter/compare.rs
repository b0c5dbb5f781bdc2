//! Comparators made ready to run (regexes compiled, substrings lowercased) and HBase's rule
//! for turning a comparison into pass/fail.

use super::{Comparator, CompareOp};
use crate::error::{Error, Result};
use bytes::Bytes;
use std::cmp::Ordering;

/// A [`Comparator`] prepared once per filter evaluation.
#[derive(Debug, Clone)]
pub(super) enum Matcher {
    Binary(Bytes),
    BinaryPrefix(Bytes),
    /// The substring, already lowercased.
    Substring(String),
    /// `None` when the pattern does not compile: nothing matches it (the server rejects such
    /// filters with [`super::Filter::validate`] before they get here).
    Regex(Option<regex::Regex>),
}

/// The most memory a client's regular expression may compile to (the regex crate's default is
/// 10 MiB): a pattern like `(x{1000}){1000}` in a filter would otherwise cost the server that
/// much memory and its compile time per request. Past it the filter is refused, naming it.
pub const MAX_REGEX_BYTES: usize = 1 << 20;

/// Compiles a pattern the way HBase's regex comparator does: `.` also matches newlines.
pub fn compile_regex(pattern: &str) -> Result<regex::Regex> {
    regex::RegexBuilder::new(pattern)
        .dot_matches_new_line(true)
        .size_limit(MAX_REGEX_BYTES)
        .dfa_size_limit(MAX_REGEX_BYTES)
        .build()
        .map_err(|e| Error::InvalidArgument(format!("invalid regular expression '{pattern}': {e}")))
}

impl Matcher {
    pub(super) fn new(comparator: &Comparator) -> Matcher {
        match comparator {
            Comparator::Binary(b) => Matcher::Binary(b.clone()),
            Comparator::BinaryPrefix(b) => Matcher::BinaryPrefix(b.clone()),
            Comparator::Substring(s) => Matcher::Substring(s.to_lowercase()),
            Comparator::Regex(p) => Matcher::Regex(compile_regex(p).ok()),
        }
    }

    /// Where `subject` stands relative to the operand. Substring and regex comparators know
    /// only "matches" (`Equal`) and "does not" (`Less`, as HBase's comparators return 1 for
    /// the operand side).
    fn order(&self, subject: &[u8]) -> Ordering {
        match self {
            Matcher::Binary(operand) => subject.cmp(operand),
            Matcher::BinaryPrefix(operand) => {
                subject[..subject.len().min(operand.len())].cmp(operand)
            }
            Matcher::Substring(needle) => {
                let hay = String::from_utf8_lossy(subject).to_lowercase();
                found(hay.contains(needle.as_str()))
            }
            Matcher::Regex(Some(re)) => found(re.is_match(&String::from_utf8_lossy(subject))),
            Matcher::Regex(None) => Ordering::Less,
        }
    }

    /// Whether `subject op operand` holds.
    pub(super) fn passes(&self, op: CompareOp, subject: &[u8]) -> bool {
        op.holds(self.order(subject))
    }
}

fn found(hit: bool) -> Ordering {
    if hit {
        Ordering::Equal
    } else {
        Ordering::Less
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(c: Comparator) -> Matcher {
        Matcher::new(&c)
    }

    #[test]
    fn a_pattern_compiling_past_the_bound_is_refused_naming_it() {
        assert!(compile_regex("^user[0-9]+$").is_ok());
        let huge = "(x{1000}){1000}";
        let err = compile_regex(huge).expect_err("too big").to_string();
        assert!(err.contains(huge) && err.contains("size limit"), "{err}");
    }

    #[test]
    fn binary_compares_the_subject_against_the_operand() {
        let b = m(Comparator::Binary(Bytes::from_static(b"m")));
        assert!(b.passes(CompareOp::Less, b"a"));
        assert!(!b.passes(CompareOp::Less, b"m"));
        assert!(b.passes(CompareOp::LessOrEqual, b"m"));
        assert!(b.passes(CompareOp::Equal, b"m"));
        assert!(!b.passes(CompareOp::Equal, b"mm"));
        assert!(b.passes(CompareOp::NotEqual, b"mm"));
        assert!(b.passes(CompareOp::Greater, b"mm"));
        assert!(b.passes(CompareOp::GreaterOrEqual, b"m"));
        assert!(!b.passes(CompareOp::GreaterOrEqual, b"l"));
        assert!(!b.passes(CompareOp::NoOp, b"m"));
        // Unsigned byte order: 0xff sorts after ASCII.
        assert!(b.passes(CompareOp::Greater, b"\xff"));
    }

    #[test]
    fn binary_prefix_compares_only_the_operand_length() {
        let p = m(Comparator::BinaryPrefix(Bytes::from_static(b"ab")));
        assert!(p.passes(CompareOp::Equal, b"abzzz"));
        assert!(p.passes(CompareOp::Equal, b"ab"));
        assert!(!p.passes(CompareOp::Equal, b"a"));
        assert!(p.passes(CompareOp::Less, b"a"));
        assert!(p.passes(CompareOp::Greater, b"ac"));
        assert!(p.passes(CompareOp::GreaterOrEqual, b"ab\x00"));
    }

    #[test]
    fn substring_is_case_insensitive() {
        let s = m(Comparator::Substring("LoW".into()));
        assert!(s.passes(CompareOp::Equal, b"yellow"));
        assert!(s.passes(CompareOp::Equal, b"LOWER"));
        assert!(!s.passes(CompareOp::Equal, b"high"));
        assert!(s.passes(CompareOp::NotEqual, b"high"));
        assert!(!s.passes(CompareOp::NotEqual, b"slow"));
    }

    #[test]
    fn regex_finds_anywhere_and_dot_matches_newline() {
        let r = m(Comparator::Regex("^a.c$".into()));
        assert!(r.passes(CompareOp::Equal, b"abc"));
        assert!(r.passes(CompareOp::Equal, b"a\nc"));
        assert!(!r.passes(CompareOp::Equal, b"abcd"));
        assert!(r.passes(CompareOp::NotEqual, b"xyz"));
        let find = m(Comparator::Regex("b+".into()));
        assert!(find.passes(CompareOp::Equal, b"abbbc"));
        let broken = m(Comparator::Regex("(".into()));
        assert!(!broken.passes(CompareOp::Equal, b"("));
        assert!(compile_regex("(")
            .expect_err("unbalanced")
            .to_string()
            .contains("'('"));
    }
}
