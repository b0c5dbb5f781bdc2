//! Bytes shown to people.

use std::fmt::Write as _;

/// Bytes as HBase prints them: letters, digits, space and the punctuation set
/// `` `~!@#$%^&*()-_=+[]{}|;:'",.<>/? `` as they are, everything else (backslash included)
/// as `\xHH` with uppercase hex.
pub fn to_string_binary(bytes: &[u8]) -> String {
    const KEPT_PUNCTUATION: &[u8] = b" `~!@#$%^&*()-_=+[]{}|;:'\",.<>/?";
    let mut out = String::with_capacity(bytes.len());
    for &b in bytes {
        if b.is_ascii_alphanumeric() || KEPT_PUNCTUATION.contains(&b) {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "\\x{b:02X}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn printable_bytes_stay_and_others_are_escaped_as_hbase_does() {
        assert_eq!(
            super::to_string_binary(b"row-1\x00\\\xff"),
            "row-1\\x00\\x5C\\xFF"
        );
    }
}
