//! Bootstrap tokens, as kube-apiserver's bootstrap token authenticator: a token
//! `<id>.<secret>` (`[a-z0-9]{6}.[a-z0-9]{16}`) is good while the kube-system Secret
//! `bootstrap-token-<id>` of type `bootstrap.kubernetes.io/token` exists, is not being deleted,
//! holds that `token-id` and `token-secret` (compared in constant time), says
//! `usage-bootstrap-authentication: "true"` and has not passed its `expiration` (RFC 3339). The
//! user is `system:bootstrap:<id>` in `system:bootstrappers` and the Secret's
//! `auth-extra-groups`, each of which must be `system:bootstrappers:…` (else the token is
//! refused).

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use chrono::{DateTime, Utc};
use serde_json::Value;
use subtle::ConstantTimeEq as _;

use super::{ObjectLookup, User};

/// The group every bootstrap token's user is in.
pub(crate) const BOOTSTRAPPERS: &str = "system:bootstrappers";

/// The `(id, secret)` of a token in bootstrap form.
fn parse(token: &str) -> Option<(&str, &str)> {
    let (id, secret) = token.split_once('.')?;
    let ok = |s: &str, len: usize| {
        s.len() == len
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    };
    (ok(id, 6) && ok(secret, 16)).then_some((id, secret))
}

/// A decoded `data` entry of a Secret.
fn data(secret: &Value, key: &str) -> Option<String> {
    let encoded = secret["data"][key].as_str()?;
    String::from_utf8(STANDARD.decode(encoded).ok()?).ok()
}

/// Whether `group` may be added by `auth-extra-groups`.
fn valid_extra_group(group: &str) -> bool {
    let Some(rest) = group.strip_prefix("system:bootstrappers:") else {
        return false;
    };
    let allowed = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b':' || b == b'-';
    !rest.is_empty()
        && rest.len() <= 256
        && rest.bytes().all(allowed)
        && rest
            .bytes()
            .last()
            .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
}

/// The user a bootstrap token stands for at `now`, if it is good.
pub(crate) fn authenticate(
    token: &str,
    objects: &dyn ObjectLookup,
    now: DateTime<Utc>,
) -> Option<User> {
    let (id, secret) = parse(token)?;
    let found = objects.object(
        "secrets",
        Some("kube-system"),
        &format!("bootstrap-token-{id}"),
    )?;
    if found["type"] != "bootstrap.kubernetes.io/token"
        || !found["metadata"]["deletionTimestamp"].is_null()
    {
        return None;
    }
    if data(&found, "token-id")? != id {
        return None;
    }
    let held = data(&found, "token-secret")?;
    if !bool::from(held.as_bytes().ct_eq(secret.as_bytes())) {
        return None;
    }
    if data(&found, "usage-bootstrap-authentication").as_deref() != Some("true") {
        return None;
    }
    if let Some(expiration) = data(&found, "expiration") {
        let expires = DateTime::parse_from_rfc3339(expiration.trim()).ok()?;
        if now >= expires {
            return None;
        }
    }
    let mut groups = vec![BOOTSTRAPPERS.to_owned()];
    if let Some(extra) = data(&found, "auth-extra-groups") {
        for group in extra.split(',').map(str::trim).filter(|g| !g.is_empty()) {
            if !valid_extra_group(group) {
                return None;
            }
            if !groups.iter().any(|g| g == group) {
                groups.push(group.to_owned());
            }
        }
    }
    Some(User::new(format!("system:bootstrap:{id}"), groups))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    struct One(Value);

    impl ObjectLookup for One {
        fn object(&self, resource: &str, namespace: Option<&str>, name: &str) -> Option<Value> {
            (resource == "secrets"
                && namespace == Some("kube-system")
                && name == "bootstrap-token-abcdef")
                .then(|| self.0.clone())
        }
    }

    fn secret(data: &[(&str, &str)]) -> One {
        let data: serde_json::Map<String, Value> = data
            .iter()
            .map(|(k, v)| ((*k).to_owned(), json!(STANDARD.encode(v))))
            .collect();
        One(json!({"type": "bootstrap.kubernetes.io/token", "metadata": {}, "data": data}))
    }

    const TOKEN: &str = "abcdef.0123456789abcdef";

    #[test]
    fn a_good_token_should_be_a_bootstrapper_with_its_extra_groups() {
        let objects = secret(&[
            ("token-id", "abcdef"),
            ("token-secret", "0123456789abcdef"),
            ("usage-bootstrap-authentication", "true"),
            ("expiration", "2099-01-01T00:00:00Z"),
            (
                "auth-extra-groups",
                "system:bootstrappers:kubeadm:default-node-token",
            ),
        ]);
        let user = authenticate(TOKEN, &objects, Utc::now()).unwrap();
        assert_eq!(user.name, "system:bootstrap:abcdef");
        assert_eq!(
            user.groups,
            [
                BOOTSTRAPPERS,
                "system:bootstrappers:kubeadm:default-node-token",
                "system:authenticated"
            ]
        );
        assert!(authenticate("abcdef.0123456789abcdee", &objects, Utc::now()).is_none());
        assert!(authenticate("abcdef.0123456789ABCDEF", &objects, Utc::now()).is_none());
        assert!(authenticate("zzzzzz.0123456789abcdef", &objects, Utc::now()).is_none());
    }

    #[test]
    fn expired_unusable_or_badly_grouped_tokens_should_be_refused() {
        let base = [("token-id", "abcdef"), ("token-secret", "0123456789abcdef")];
        let with = |more: &[(&'static str, &'static str)]| {
            let mut all = base.to_vec();
            all.extend_from_slice(more);
            secret(&all)
        };
        let now = Utc::now();
        assert!(authenticate(TOKEN, &with(&[]), now).is_none(), "no usage");
        let usage = ("usage-bootstrap-authentication", "true");
        assert!(authenticate(TOKEN, &with(&[usage]), now).is_some());
        assert!(authenticate(
            TOKEN,
            &with(&[usage, ("expiration", "2000-01-01T00:00:00Z")]),
            now
        )
        .is_none());
        assert!(authenticate(
            TOKEN,
            &with(&[usage, ("auth-extra-groups", "system:masters")]),
            now
        )
        .is_none());
        assert!(authenticate(
            TOKEN,
            &with(&[usage, ("auth-extra-groups", "system:bootstrappers:")]),
            now
        )
        .is_none());
    }
}
