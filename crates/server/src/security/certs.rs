//! A development certificate authority (`cellar cert`): a CA, server certificates for the
//! hosts a server is reached by, and client certificates whose CN is a user. ECDSA P-256
//! keys, written as PEM (keys as unencrypted PKCS#8, which rustls and HBase's Java client both
//! read). For development and tests; production certificates come from the operator's CA.

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use std::time::{Duration, SystemTime};

/// How long a CA and the certificates it issues are valid by default.
pub const DEFAULT_VALID: Duration = Duration::from_secs(365 * 24 * 3600);

/// A CA that issues certificates.
pub struct DevCa {
    cert_pem: String,
    key_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

/// A certificate to issue.
#[derive(Debug, Clone)]
pub struct Leaf {
    /// The subject's CN: a user for client certificates, a host for server ones.
    pub common_name: String,
    /// Subject alternative names: DNS names or IP addresses (a server's hosts).
    pub hosts: Vec<String>,
    /// Usable by a server (TLS server authentication).
    pub server: bool,
    /// Usable by a client (TLS client authentication).
    pub client: bool,
    pub not_before: SystemTime,
    pub not_after: SystemTime,
}

impl Leaf {
    /// A certificate valid from a day ago for [`DEFAULT_VALID`].
    pub fn new(common_name: &str) -> Leaf {
        let now = SystemTime::now();
        Leaf {
            common_name: common_name.to_string(),
            hosts: Vec::new(),
            server: false,
            client: false,
            not_before: now - Duration::from_secs(24 * 3600),
            not_after: now + DEFAULT_VALID,
        }
    }
}

/// A certificate and its private key, both PEM.
#[derive(Debug, Clone)]
pub struct Issued {
    pub cert_pem: String,
    pub key_pem: String,
}

impl DevCa {
    /// A new self-signed CA named `name`.
    pub fn create(name: &str) -> Result<DevCa, String> {
        let key = KeyPair::generate().map_err(|e| format!("cannot make a CA key: {e}"))?;
        let mut params = CertificateParams::new(Vec::<String>::new())
            .map_err(|e| format!("CA parameters: {e}"))?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
        ];
        let now = SystemTime::now();
        params.not_before = (now - Duration::from_secs(24 * 3600)).into();
        params.not_after = (now + 10 * DEFAULT_VALID).into();
        let cert = params
            .self_signed(&key)
            .map_err(|e| format!("cannot sign the CA certificate: {e}"))?;
        let key_pem = key.serialize_pem();
        Ok(DevCa {
            cert_pem: cert.pem(),
            key_pem,
            issuer: Issuer::new(params, key),
        })
    }

    /// A CA from its certificate and key (PEM), as [`DevCa::create`] wrote them.
    pub fn load(cert_pem: &str, key_pem: &str) -> Result<DevCa, String> {
        let key = KeyPair::from_pem(key_pem).map_err(|e| format!("the CA key: {e}"))?;
        let issuer = Issuer::from_ca_cert_pem(cert_pem, key)
            .map_err(|e| format!("the CA certificate: {e}"))?;
        let key_pem = key_pem.to_string();
        Ok(DevCa {
            cert_pem: cert_pem.to_string(),
            key_pem,
            issuer,
        })
    }

    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    pub fn key_pem(&self) -> &str {
        &self.key_pem
    }

    /// Issues `leaf`, signed by this CA, with a key of its own.
    pub fn issue(&self, leaf: &Leaf) -> Result<Issued, String> {
        let key = KeyPair::generate().map_err(|e| format!("cannot make a key: {e}"))?;
        let mut params = CertificateParams::new(leaf.hosts.clone())
            .map_err(|e| format!("certificate for {:?}: {e}", leaf.common_name))?;
        params
            .distinguished_name
            .push(DnType::CommonName, leaf.common_name.as_str());
        params.use_authority_key_identifier_extension = true;
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        if leaf.server {
            params
                .extended_key_usages
                .push(ExtendedKeyUsagePurpose::ServerAuth);
        }
        if leaf.client {
            params
                .extended_key_usages
                .push(ExtendedKeyUsagePurpose::ClientAuth);
        }
        params.not_before = leaf.not_before.into();
        params.not_after = leaf.not_after.into();
        let cert = params.signed_by(&key, &self.issuer).map_err(|e| {
            format!(
                "cannot sign the certificate for {:?}: {e}",
                leaf.common_name
            )
        })?;
        Ok(Issued {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issued_client_certificates_name_their_user() {
        let ca = DevCa::create("test CA").expect("ca");
        let mut leaf = Leaf::new("alice");
        leaf.client = true;
        let issued = ca.issue(&leaf).expect("issue");
        let der = rustls::pki_types::CertificateDer::from_pem_slice(issued.cert_pem.as_bytes())
            .expect("pem");
        assert_eq!(
            super::super::identity::user_from_certificate(&der).expect("user"),
            "alice"
        );
        // A CA reloaded from its files issues too.
        let again = DevCa::load(ca.cert_pem(), ca.key_pem()).expect("load");
        assert!(again.issue(&leaf).is_ok());
    }

    use rustls::pki_types::pem::PemObject;
}
