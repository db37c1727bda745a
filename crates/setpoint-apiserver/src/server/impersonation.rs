//! Impersonation (`Impersonate-User`, `Impersonate-Group`, `Impersonate-Uid`,
//! `Impersonate-Extra-<key>`; `kubectl --as`, `--as-group`, `--as-uid`): acting as another
//! user, as kube-apiserver's impersonation filter does. Each thing asked for is authorized
//! with the `impersonate` verb for the caller: the user on `users` (a ServiceAccount's user name
//! on `serviceaccounts` in its namespace), each group on `groups`, the UID on
//! `authentication.k8s.io` `uids`, each extra value on `authentication.k8s.io`
//! `userextras/<key>`; the first refused gets kube's 403. The request then runs as the user
//! asked for, in the groups asked for (a ServiceAccount's groups when none are), plus
//! `system:authenticated` (`system:unauthenticated` for `system:anonymous`).
//!
//! A [`Handler`](super::Handler) without an authorizer cannot decide who may impersonate whom,
//! so by default every impersonation is refused ([`refuse`]) rather than ignored.

use http::HeaderMap;

use setpoint_core::{ApiError, GroupResource};

use crate::auth::User;
use crate::authz::{forbidden as refusal, Attributes, Authorizer, Decision};

/// The header naming the user to act as.
const USER: &str = "impersonate-user";
/// The header naming a group to act as a member of (may repeat).
const GROUP: &str = "impersonate-group";
/// The header naming the UID to act as.
const UID: &str = "impersonate-uid";
/// The prefix of headers naming extra attributes (`Impersonate-Extra-<key>: <value>`).
const EXTRA_PREFIX: &str = "impersonate-extra-";

/// The group of the extras' and UIDs' impersonation resources.
const AUTHENTICATION: &str = "authentication.k8s.io";

/// Whether `headers` ask for an impersonation.
pub(crate) fn asks(headers: &HeaderMap) -> bool {
    headers
        .keys()
        .any(|k| k.as_str().starts_with("impersonate-"))
}

/// The user a request of `user` with `headers` runs as: `user` itself without impersonation
/// headers, else the impersonated user if `authorizer` allows each part of it.
pub(crate) fn impersonate(
    authorizer: &dyn Authorizer,
    user: User,
    headers: &HeaderMap,
) -> Result<User, ApiError> {
    if !asks(headers) {
        return Ok(user);
    }
    let text = |v: &http::HeaderValue| String::from_utf8_lossy(v.as_bytes()).into_owned();
    let name = headers.get(USER).map(text);
    let groups: Vec<String> = headers.get_all(GROUP).iter().map(text).collect();
    let uid = headers.get(UID).map(text);
    let mut extra: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for (key, value) in headers {
        if let Some(raw) = key.as_str().strip_prefix(EXTRA_PREFIX) {
            extra
                .entry(percent_decode(raw).to_lowercase())
                .or_default()
                .push(text(value));
        }
    }
    let Some(name) = name else {
        return Err(ApiError::internal(
            "requested impersonation of groups, a UID or extras without impersonating a user",
        ));
    };
    let check = |attributes: Attributes| match authorizer.authorize(&attributes) {
        Decision::Allow(_) => Ok(()),
        refused => Err(refusal(&attributes, refused.reason())),
    };
    let service_account = name
        .strip_prefix("system:serviceaccount:")
        .and_then(|rest| rest.split_once(':'))
        .filter(|(ns, sa)| !ns.is_empty() && !sa.is_empty() && !sa.contains(':'))
        .map(|(ns, sa)| (ns.to_owned(), sa.to_owned()));
    match &service_account {
        Some((ns, sa)) => check(Attributes::resource(
            &user,
            "impersonate",
            "",
            "serviceaccounts",
            ns,
            sa,
        ))?,
        None => check(Attributes::resource(
            &user,
            "impersonate",
            "",
            "users",
            "",
            &name,
        ))?,
    }
    for group in &groups {
        check(Attributes::resource(
            &user,
            "impersonate",
            "",
            "groups",
            "",
            group,
        ))?;
    }
    for (key, values) in &extra {
        for value in values {
            let resource = format!("userextras/{key}");
            check(Attributes::resource(
                &user,
                "impersonate",
                AUTHENTICATION,
                &resource,
                "",
                value,
            ))?;
        }
    }
    if let Some(uid) = &uid {
        check(Attributes::resource(
            &user,
            "impersonate",
            AUTHENTICATION,
            "uids",
            "",
            uid,
        ))?;
    }
    let mut acting = User {
        name,
        uid: uid.unwrap_or_default(),
        groups,
        extra,
    };
    if acting.groups.is_empty() {
        if let Some((ns, _)) = &service_account {
            acting.groups = vec![
                "system:serviceaccounts".to_owned(),
                format!("system:serviceaccounts:{ns}"),
            ];
        }
    }
    let implied = if acting.name == "system:anonymous" {
        "system:unauthenticated"
    } else {
        crate::auth::AUTHENTICATED_GROUP
    };
    if !acting.in_group(implied) {
        acting.groups.push(implied.to_owned());
    }
    Ok(acting)
}

/// `%XX` escapes decoded (an extra's key in a header name), invalid ones kept as they are.
fn percent_decode(raw: &str) -> String {
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

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

    /// Allows impersonating what is in `allowed` (`resource/name`).
    struct Allowing(&'static [&'static str]);

    impl Authorizer for Allowing {
        fn authorize(&self, a: &Attributes) -> Decision {
            let asked = format!("{}/{}", a.combined_resource(), a.name);
            if a.verb == "impersonate" && self.0.contains(&asked.as_str()) {
                Decision::Allow(String::new())
            } else {
                Decision::NoOpinion(String::new())
            }
        }
    }

    fn asking(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (k, v) in pairs {
            headers.append(*k, HeaderValue::from_static(v));
        }
        headers
    }

    #[test]
    fn an_allowed_impersonation_should_run_as_the_user_asked_for() {
        let bob = User::new("bob", []);
        let allowing = Allowing(&[
            "users/jane",
            "groups/devs",
            "userextras/scopes/view",
            "uids/42",
            "serviceaccounts/robot",
        ]);
        let headers = asking(&[
            ("impersonate-user", "jane"),
            ("impersonate-group", "devs"),
            ("impersonate-extra-scopes", "view"),
            ("impersonate-uid", "42"),
        ]);
        let jane = impersonate(&allowing, bob.clone(), &headers).unwrap();
        assert_eq!(jane.name, "jane");
        assert_eq!(jane.groups, ["devs", "system:authenticated"]);
        assert_eq!(jane.uid, "42");
        assert_eq!(jane.extra["scopes"], ["view"]);
        let robot = impersonate(
            &allowing,
            bob.clone(),
            &asking(&[("impersonate-user", "system:serviceaccount:ns:robot")]),
        )
        .unwrap();
        assert_eq!(
            robot.groups,
            [
                "system:serviceaccounts",
                "system:serviceaccounts:ns",
                "system:authenticated"
            ]
        );
        assert_eq!(
            impersonate(&allowing, bob.clone(), &HeaderMap::new()).unwrap(),
            bob
        );
    }

    #[test]
    fn a_refused_impersonation_should_get_kubes_403() {
        let bob = User::new("bob", []);
        let allowing = Allowing(&["users/jane"]);
        let refused = impersonate(
            &allowing,
            bob.clone(),
            &asking(&[("impersonate-user", "root")]),
        )
        .unwrap_err();
        assert_eq!(
            refused.message,
            r#"users "root" is forbidden: User "bob" cannot impersonate resource "users" in API group "" at the cluster scope"#
        );
        let refused = impersonate(
            &allowing,
            bob.clone(),
            &asking(&[
                ("impersonate-user", "jane"),
                ("impersonate-group", "admins"),
            ]),
        )
        .unwrap_err();
        assert!(
            refused
                .message
                .starts_with(r#"groups "admins" is forbidden"#),
            "{}",
            refused.message
        );
        let refused = impersonate(
            &allowing,
            bob,
            &asking(&[("impersonate-user", "system:serviceaccount:ns:x")]),
        )
        .unwrap_err();
        assert!(refused.message.contains(r#"cannot impersonate resource "serviceaccounts" in API group "" in the namespace "ns""#), "{}", refused.message);
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
