//! Who a client certificate names: the user of a connection that presented one. The subject's
//! common name (CN) when it has one, else the first subject alternative name that names
//! someone (an e-mail address, a DNS name, a URI). The certificate was already checked by the
//! TLS handshake (signed by the client CA, in its validity period); this only reads it, and
//! refuses names no user could have (empty, too long, control characters).

/// The longest user name taken from a certificate.
pub const MAX_USER_BYTES: usize = 256;

/// The user a DER-encoded X.509 certificate names, or why it names none.
pub fn user_from_certificate(der: &[u8]) -> Result<String, String> {
    let (rest, cert) = x509_parser::parse_x509_certificate(der)
        .map_err(|e| format!("the client certificate does not parse: {e}"))?;
    if !rest.is_empty() {
        return Err("the client certificate has trailing bytes".into());
    }
    let cn = cert
        .subject()
        .iter_common_name()
        .next()
        .map(|cn| {
            cn.as_str()
                .map(str::to_string)
                .map_err(|e| format!("the certificate's common name is not text: {e}"))
        })
        .transpose()?;
    let name = match cn {
        Some(cn) => cn,
        None => san_user(&cert)?.ok_or_else(|| {
            "the client certificate names no user: its subject has no CN and it has no e-mail, DNS or URI subject alternative name".to_string()
        })?,
    };
    check_user(&name)?;
    Ok(name)
}

/// The first subject alternative name that names a user.
fn san_user(
    cert: &x509_parser::certificate::X509Certificate<'_>,
) -> Result<Option<String>, String> {
    use x509_parser::extensions::GeneralName;
    let san = cert
        .subject_alternative_name()
        .map_err(|e| format!("the certificate's subject alternative names do not parse: {e}"))?;
    let Some(san) = san else { return Ok(None) };
    Ok(san.value.general_names.iter().find_map(|n| match n {
        GeneralName::RFC822Name(s) | GeneralName::DNSName(s) | GeneralName::URI(s) => {
            Some((*s).to_string())
        }
        _ => None,
    }))
}

/// A user name as permissions and audit lines can hold it.
pub fn check_user(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("the certificate's user name is empty".into());
    }
    if name.len() > MAX_USER_BYTES {
        return Err(format!(
            "the certificate's user name is {} bytes, more than {MAX_USER_BYTES}",
            name.len()
        ));
    }
    if name.chars().any(char::is_control) {
        return Err("the certificate's user name holds control characters".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(user_from_certificate(b"").is_err());
        assert!(user_from_certificate(&[0x30, 0x82, 0xff, 0xff, 0x00]).is_err());
    }

    #[test]
    fn user_names_are_checked() {
        assert!(check_user("alice").is_ok());
        assert!(check_user("").is_err());
        assert!(check_user("a\nb").is_err());
        assert!(check_user(&"x".repeat(MAX_USER_BYTES + 1)).is_err());
    }
}
