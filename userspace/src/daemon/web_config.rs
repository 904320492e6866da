//! `--web-config-file`: TLS and basic authentication of the endpoint, in the YAML of the
//! Prometheus exporter toolkit (docs/daemon.md), of which it reads `tls_server_config` (`cert_file`
//! and `key_file`, PEM) and `basic_auth_users` (user name to bcrypt hash). Any other key is
//! refused, so that a setting the daemon would not apply (client certificates, say) is never
//! silently dropped. The file, the certificate and the key are read once at start, each a regular
//! file of at most [`MAX_FILE`] bytes; relative paths in it are relative to its folder.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde::Deserialize;
use tokio_rustls::TlsAcceptor;

use super::basic_auth::BasicAuth;

/// The largest web configuration, certificate or key file read.
pub const MAX_FILE: u64 = 64 * 1024;

/// What the web configuration file asks for.
pub struct WebConfig {
    /// TLS, with the certificate and key of `tls_server_config`.
    pub tls: Option<TlsAcceptor>,
    /// The users of `basic_auth_users`, if there are any.
    pub auth: Option<BasicAuth>,
}

/// Why the web configuration cannot be used: one line that says what and how to fix it.
#[derive(Debug, thiserror::Error)]
#[error("--web-config-file {}: {problem}", .path.display())]
pub struct WebConfigError {
    /// The web configuration file.
    path: PathBuf,
    /// What is wrong.
    problem: String,
}

/// The file as the exporter toolkit writes it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    tls_server_config: Option<TlsFiles>,
    basic_auth_users: Option<BTreeMap<String, String>>,
}

/// `tls_server_config`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TlsFiles {
    cert_file: PathBuf,
    key_file: PathBuf,
}

/// Reads the web configuration file `path`.
pub fn read(path: &Path) -> Result<WebConfig, WebConfigError> {
    let error = |problem: String| WebConfigError {
        path: path.to_path_buf(),
        problem,
    };
    let text = read_small(path).map_err(&error)?;
    let file: File = if text.iter().all(u8::is_ascii_whitespace) {
        File {
            tls_server_config: None,
            basic_auth_users: None,
        }
    } else {
        serde_yaml_ng::from_slice(&text).map_err(|e| {
            error(format!(
                "{e}. It takes tls_server_config (cert_file, key_file) and basic_auth_users \
                 (user: bcrypt hash), as Prometheus exporters read them."
            ))
        })?
    };
    let folder = path.parent().unwrap_or(Path::new("."));
    let tls = file
        .tls_server_config
        .map(|files| tls_acceptor(&folder.join(files.cert_file), &folder.join(files.key_file)))
        .transpose()
        .map_err(&error)?;
    let auth = match file.basic_auth_users {
        Some(users) if !users.is_empty() => {
            for (user, hash) in &users {
                if hash.parse::<bcrypt::HashParts>().is_err() {
                    return Err(error(format!(
                        "the password of user {} is not a bcrypt hash: give the output of \
                         `htpasswd -nBC 10 \"\" | tr -d ':\\n'`",
                        joularcode_core::log::quote(user, 64)
                    )));
                }
            }
            Some(BasicAuth::new(users))
        }
        _ => None,
    };
    Ok(WebConfig { tls, auth })
}

/// The TLS acceptor of the certificate chain at `cert` and the private key at `key`.
fn tls_acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor, String> {
    let certs = CertificateDer::pem_slice_iter(&read_small(cert)?)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("cert_file {}: {e}", cert.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "cert_file {}: no PEM certificate in it",
            cert.display()
        ));
    }
    let key_der = PrivateKeyDer::from_pem_slice(&read_small(key)?)
        .map_err(|e| format!("key_file {}: no PEM private key in it ({e})", key.display()))?;
    // ring, which builds with a C compiler alone (aws-lc-rs needs more); it offers no
    // post-quantum key exchange, which metrics of energy do not call for.
    #[allow(deprecated)]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(certs, key_der)
        .map_err(|e| {
            format!(
                "cert_file {} and key_file {} cannot serve TLS: {e}",
                cert.display(),
                key.display()
            )
        })?;
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// The bytes of the regular file `path`, of at most [`MAX_FILE`] bytes (a FIFO is refused, not
/// waited on).
fn read_small(path: &Path) -> Result<Vec<u8>, String> {
    use std::os::unix::fs::OpenOptionsExt;
    let said = |e: std::io::Error| format!("cannot read {}: {e}", path.display());
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(said)?;
    let meta = file.metadata().map_err(said)?;
    if !meta.is_file() {
        return Err(format!("{} is not a regular file", path.display()));
    }
    let mut bytes = Vec::new();
    file.take(MAX_FILE + 1)
        .read_to_end(&mut bytes)
        .map_err(said)?;
    if bytes.len() as u64 > MAX_FILE {
        return Err(format!(
            "{} is larger than {MAX_FILE} bytes: it is not a web configuration, certificate or key",
            path.display()
        ));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_text(text: &str) -> Result<WebConfig, String> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("web.yml");
        std::fs::write(&path, text).unwrap();
        read(&path).map_err(|e| e.to_string())
    }

    #[test]
    fn users_with_bcrypt_hashes_are_read() {
        let config = read_text(
            "basic_auth_users:\n  alice: $2y$10$mDwo.lAisC94iLAyP81MCesa29IzH37oigHC/42V2pdJlUprsJPze\n",
        )
        .unwrap();
        assert!(config.auth.is_some() && config.tls.is_none());
        let empty = read_text("").unwrap();
        assert!(empty.auth.is_none() && empty.tls.is_none());
    }

    #[test]
    fn a_wrong_file_is_refused_in_one_line_that_says_what() {
        for (text, said) in [
            ("basic_auth_users:\n  alice: secret\n", "not a bcrypt hash"),
            (
                "tls_config:\n  cert_file: a\n",
                "unknown field `tls_config`",
            ),
            (
                "tls_server_config:\n  cert_file: a.crt\n  key_file: a.key\n  client_ca_file: ca\n",
                "unknown field `client_ca_file`",
            ),
            (
                "tls_server_config:\n  cert_file: missing.crt\n  key_file: missing.key\n",
                "cannot read",
            ),
            ("tls_server_config: [1, 2\n", "line 1"),
        ] {
            let error = read_text(text).err().unwrap_or_else(|| panic!("{text}"));
            assert!(error.contains(said), "{text}: {error}");
            assert!(error.starts_with("--web-config-file "), "{error}");
            assert!(!error.contains('\n'), "{error}");
        }
    }

    #[test]
    fn a_file_over_the_size_limit_is_refused() {
        let error = read_text(&"#".repeat(MAX_FILE as usize + 1)).err().unwrap();
        assert!(error.contains("larger than"), "{error}");
    }
}
