//! Impersonation (`Impersonate-User`, `Impersonate-Group`, `Impersonate-Uid`,
//! `Impersonate-Extra-*`; `kubectl --as`): acting as another user. Setpoint has no
//! authorization yet, so it cannot decide who may impersonate whom; rather than run the request
//! as the caller (which would silently ignore what was asked, e.g. `kubectl --as=nobody get
//! secrets` reading every secret), every request carrying these headers is refused with the
//! 403 `Status` kube-apiserver answers when its authorizer refuses an impersonation.

use http::HeaderMap;

use setpoint_core::{ApiError, GroupResource};

use crate::auth::User;

/// The header naming the user to act as.
const USER: &str = "impersonate-user";
/// The header naming a group to act as a member of (may repeat).
const GROUP: &str = "impersonate-group";
/// The header naming the UID to act as.
const UID: &str = "impersonate-uid";
/// The prefix of headers naming extra attributes (`Impersonate-Extra-<key>: <value>`).
const EXTRA_PREFIX: &str = "impersonate-extra-";

/// The refusal for a request by `user` that asks to impersonate, naming the first thing it
/// asks for (the user, else a group, a UID, an extra); `None` if it asks for nothing.
pub(crate) fn refuse(headers: &HeaderMap, user: &User) -> Option<ApiError> {
    let value = |name: &str| {
        headers
            .get(name)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
    };
    let (resource, name) = value(USER)
        .map(|n| ("users", n))
        .or_else(|| value(GROUP).map(|n| ("groups", n)))
        .or_else(|| value(UID).map(|n| ("uids", n)))
        .or_else(|| {
            headers
                .iter()
                .find(|(k, _)| k.as_str().starts_with(EXTRA_PREFIX))
                .map(|(_, v)| {
                    (
                        "userextras",
                        String::from_utf8_lossy(v.as_bytes()).into_owned(),
                    )
                })
        })?;
    Some(forbidden(&user.name, resource, &name))
}

/// kube-apiserver's refusal of an impersonation by its authorizer, with the reason after the
/// colon: `<resource> "<name>" is forbidden: User "<user>" cannot impersonate …`.
fn forbidden(user: &str, resource: &str, name: &str) -> ApiError {
    let group = impersonated_group(resource);
    ApiError::forbidden_object(
        &GroupResource::new(group, resource),
        name,
        &format!(
            "User {user:?} cannot impersonate resource {resource:?} in API group {group:?} at \
             the cluster scope: impersonation is not supported by this server"
        ),
    )
}

/// The API group of an impersonated `resource`, as kube-apiserver's authorizer is asked.
fn impersonated_group(resource: &str) -> &'static str {
    match resource {
        "users" | "groups" | "serviceaccounts" => "",
        _ => "authentication.k8s.io",
    }
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    fn admin() -> User {
        User {
            name: "setpoint-admin".to_owned(),
            groups: vec!["system:masters".to_owned()],
            ..User::default()
        }
    }

    #[test]
    fn requests_without_impersonation_headers_should_pass() {
        let mut headers = HeaderMap::new();
        headers.insert("accept", HeaderValue::from_static("application/json"));
        assert_eq!(refuse(&headers, &admin()), None);
    }

    #[test]
    fn every_impersonation_header_should_be_refused() {
        for (name, resource) in [
            ("Impersonate-User", "users"),
            ("Impersonate-Group", "groups"),
            ("Impersonate-Uid", "uids"),
            ("Impersonate-Extra-Scopes", "userextras"),
        ] {
            let mut headers = HeaderMap::new();
            headers.insert(
                http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_static("someone"),
            );
            let refused = refuse(&headers, &admin()).expect("refused");
            assert_eq!(refused.reason, setpoint_core::Reason::Forbidden, "{name}");
            let details = refused.details.as_deref().expect("details");
            assert_eq!(details.kind, resource, "{name}");
            assert_eq!(details.name, "someone", "{name}");
            assert!(
                refused
                    .message
                    .contains(r#"User "setpoint-admin" cannot impersonate"#),
                "{name}: {}",
                refused.message
            );
        }
    }
}
