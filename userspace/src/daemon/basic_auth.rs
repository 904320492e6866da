//! HTTP basic authentication of the endpoint against the bcrypt hashes of the web configuration
//! file ([`super::web_config`]), as Prometheus exporters check them. A bcrypt check costs tens
//! of milliseconds by design: it runs on the runtime's blocking thread (one at a time, never on
//! the thread that serves the connections), and a user's last password that passed is kept as a
//! SHA-256 digest, compared in constant time, so that a scrape does not cost a bcrypt each time.
//! An unknown user costs a bcrypt too, so that the time of an answer does not say which users
//! exist.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use base64::Engine;
use hyper::header::HeaderValue;
use ring::digest::{digest, SHA256};

/// A bcrypt hash of no password anyone knows, checked for an unknown user.
const UNKNOWN_USER_HASH: &str = "$2y$10$QqA6W5uyGvPn1q0JfHWeQeH2sO4dyWkFP7S8N0W8Nw1vJZFZrk7bO";

/// The users allowed, and the digests of the passwords that passed.
#[derive(Debug)]
pub struct BasicAuth {
    /// User name to bcrypt hash.
    users: Arc<BTreeMap<String, String>>,
    /// User name to the SHA-256 of the last password of theirs that passed.
    passed: Mutex<HashMap<String, [u8; 32]>>,
}

impl BasicAuth {
    /// Checks passwords against `users` (name to bcrypt hash).
    pub fn new(users: BTreeMap<String, String>) -> BasicAuth {
        BasicAuth {
            users: Arc::new(users),
            passed: Mutex::new(HashMap::new()),
        }
    }

    /// Whether the `Authorization` header `value` names a user with its password.
    pub async fn allows(&self, value: Option<&HeaderValue>) -> bool {
        let Some((user, password)) = value.and_then(credentials) else {
            return false;
        };
        let sha = sha256(&password);
        let known = self
            .passed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&user)
            .is_some_and(|passed| constant_time_eq(passed, &sha));
        if known {
            return true;
        }
        let users = self.users.clone();
        let name = user.clone();
        let checked = tokio::task::spawn_blocking(move || {
            let (hash, exists) = match users.get(&name) {
                Some(hash) => (hash.as_str(), true),
                None => (UNKNOWN_USER_HASH, false),
            };
            bcrypt::verify(&password, hash).unwrap_or(false) && exists
        })
        .await
        .unwrap_or(false);
        if checked {
            self.passed
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(user, sha);
        }
        checked
    }
}

/// The user and password of a `Basic` authorization header's value.
fn credentials(value: &HeaderValue) -> Option<(String, Vec<u8>)> {
    let value = value.to_str().ok()?;
    let (scheme, encoded) = value.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let colon = decoded.iter().position(|&b| b == b':')?;
    let user = String::from_utf8(decoded[..colon].to_vec()).ok()?;
    Some((user, decoded[colon + 1..].to_vec()))
}

fn sha256(bytes: &[u8]) -> [u8; 32] {
    let mut sha = [0; 32];
    sha.copy_from_slice(digest(&SHA256, bytes).as_ref());
    sha
}

/// Whether `a` and `b` are equal, in a time that does not depend on where they differ.
fn constant_time_eq(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(user: &str, password: &str) -> HeaderValue {
        let encoded =
            base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        HeaderValue::from_str(&format!("Basic {encoded}")).unwrap()
    }

    #[tokio::test]
    async fn a_user_passes_with_its_password_only_and_again_from_the_cache() {
        let hash = bcrypt::hash("s3cret:with colon", 4).unwrap();
        let auth = BasicAuth::new(BTreeMap::from([("alice".to_string(), hash)]));
        assert!(
            auth.allows(Some(&header("alice", "s3cret:with colon")))
                .await
        );
        assert!(
            auth.allows(Some(&header("alice", "s3cret:with colon")))
                .await
        );
        assert!(!auth.allows(Some(&header("alice", "s3cret"))).await);
        assert!(!auth.allows(Some(&header("bob", "s3cret:with colon"))).await);
        assert!(!auth.allows(None).await);
        assert!(
            !auth
                .allows(Some(&HeaderValue::from_static("Basic !!!")))
                .await
        );
        assert!(
            !auth
                .allows(Some(&HeaderValue::from_static("Bearer abc")))
                .await
        );
        // An unknown user costs a real bcrypt check.
        assert_eq!(bcrypt::verify("", UNKNOWN_USER_HASH).ok(), Some(false));
    }
}
