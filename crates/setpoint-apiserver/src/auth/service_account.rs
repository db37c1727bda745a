//! ServiceAccount tokens: the claims of a bound token issued by TokenRequest (kube's
//! `kubernetes.io` private claims: namespace, serviceaccount, and the pod, secret or node it is
//! bound to) and of a legacy Secret token (kube's `kubernetes.io/serviceaccount/*` claims,
//! issuer `kubernetes/serviceaccount`, no expiry), and their validation once the signature is
//! known good: issuer, time (one minute of leeway, as kube's JWT validation), audience, and the
//! objects they name — the ServiceAccount (uid must match, not being deleted), the bound pod,
//! Secret or node (uid must match, not being deleted), a legacy token's Secret (must still hold
//! this very token) — looked up in the watch caches ([`ObjectLookup`]) on every use, so a token
//! stops working as soon as the cache sees its object go.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::{ObjectLookup, User};

/// The issuer of legacy (Secret) tokens.
pub(crate) const LEGACY_ISSUER: &str = "kubernetes/serviceaccount";
/// How far `exp`/`nbf` may be off (kube's JWT leeway).
const LEEWAY_SECONDS: i64 = 60;

/// The object a bound token is bound to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BoundKind {
    Pod,
    Secret,
    Node,
}

impl BoundKind {
    /// The kind named in a `boundObjectRef` (`v1` only).
    pub(crate) fn parse(kind: &str) -> Option<Self> {
        match kind {
            "Pod" => Some(Self::Pod),
            "Secret" => Some(Self::Secret),
            "Node" => Some(Self::Node),
            _ => None,
        }
    }

    /// The resource it is stored as.
    pub(crate) fn resource(self) -> &'static str {
        match self {
            Self::Pod => "pods",
            Self::Secret => "secrets",
            Self::Node => "nodes",
        }
    }

    /// The claim naming it.
    fn claim(self) -> &'static str {
        match self {
            Self::Pod => "pod",
            Self::Secret => "secret",
            Self::Node => "node",
        }
    }
}

/// A named object with its uid.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct NameUid {
    pub(crate) name: String,
    pub(crate) uid: String,
}

/// What a bound token is issued for.
#[derive(Clone, Debug)]
pub(crate) struct BoundToken {
    pub(crate) namespace: String,
    pub(crate) service_account: NameUid,
    pub(crate) audiences: Vec<String>,
    /// Seconds from now until it expires.
    pub(crate) expiration_seconds: i64,
    pub(crate) bound: Option<(BoundKind, NameUid)>,
    /// The node of a bound pod, when it has one (informational claim).
    pub(crate) pod_node: Option<NameUid>,
}

/// The claims of a bound token issued by `issuer` at `now` (Unix seconds), and its `jti`.
pub(crate) fn bound_claims(token: &BoundToken, issuer: &str, now: i64) -> (Value, String) {
    let jti = new_jti();
    let mut private = json!({
        "namespace": token.namespace,
        "serviceaccount": {"name": token.service_account.name, "uid": token.service_account.uid},
    });
    if let Some((kind, object)) = &token.bound {
        private[kind.claim()] = json!({"name": object.name, "uid": object.uid});
    }
    if let Some(node) = &token.pod_node {
        private["node"] = json!({"name": node.name, "uid": node.uid});
    }
    let claims = json!({
        "aud": token.audiences,
        "exp": now + token.expiration_seconds,
        "iat": now,
        "iss": issuer,
        "jti": jti,
        "kubernetes.io": private,
        "nbf": now,
        "sub": subject(&token.namespace, &token.service_account.name),
    });
    (claims, jti)
}

/// The claims of a legacy token of the Secret `secret` for the ServiceAccount `account`.
pub(crate) fn legacy_claims(namespace: &str, account: &NameUid, secret: &str) -> Value {
    json!({
        "iss": LEGACY_ISSUER,
        "kubernetes.io/serviceaccount/namespace": namespace,
        "kubernetes.io/serviceaccount/secret.name": secret,
        "kubernetes.io/serviceaccount/service-account.name": account.name,
        "kubernetes.io/serviceaccount/service-account.uid": account.uid,
        "sub": subject(namespace, &account.name),
    })
}

/// `system:serviceaccount:<namespace>:<name>`.
pub(crate) fn subject(namespace: &str, name: &str) -> String {
    format!("system:serviceaccount:{namespace}:{name}")
}

/// A random UUID (version 4), as a token id.
fn new_jti() -> String {
    crate::ids::new_uid()
}

/// What a validated token is good for: its user and the audiences it names (`None` for a
/// legacy token, which names none and is good for the API's).
pub(crate) struct Validated {
    pub(crate) user: User,
    pub(crate) audiences: Option<Vec<String>>,
}

/// Validates the claims of a bound token (signature already verified) at `now`: `issuers` are
/// the accepted issuers; the objects it names are looked up in `objects`.
pub(crate) fn validate_bound(
    claims: &Value,
    issuers: &[String],
    objects: &dyn ObjectLookup,
    now: i64,
) -> Result<Validated, String> {
    let issuer = claims["iss"].as_str().unwrap_or_default();
    if !issuers.iter().any(|i| i == issuer) {
        return Err("token issuer is not accepted".into());
    }
    let exp = claims["exp"].as_i64().ok_or("token has no expiry")?;
    if now > exp + LEEWAY_SECONDS {
        return Err("token has expired".into());
    }
    if claims["nbf"]
        .as_i64()
        .is_some_and(|nbf| now + LEEWAY_SECONDS < nbf)
    {
        return Err("token is not valid yet".into());
    }
    let audiences: Vec<String> = match &claims["aud"] {
        Value::String(a) => vec![a.clone()],
        Value::Array(all) => all
            .iter()
            .filter_map(|a| a.as_str().map(str::to_owned))
            .collect(),
        _ => Vec::new(),
    };
    let private = &claims["kubernetes.io"];
    let namespace = private["namespace"]
        .as_str()
        .ok_or("token has no namespace")?;
    let account = name_uid(&private["serviceaccount"]).ok_or("token has no serviceaccount")?;
    if claims["sub"].as_str() != Some(subject(namespace, &account.name).as_str()) {
        return Err("token subject does not match its serviceaccount".into());
    }
    live(objects, "serviceaccounts", Some(namespace), &account)?;
    let mut extra = BTreeMap::new();
    let pod = name_uid(&private["pod"]);
    let secret = name_uid(&private["secret"]);
    let node = name_uid(&private["node"]);
    if let Some(pod) = &pod {
        live(objects, "pods", Some(namespace), pod)?;
        extra.insert(
            "authentication.kubernetes.io/pod-name".to_owned(),
            vec![pod.name.clone()],
        );
        extra.insert(
            "authentication.kubernetes.io/pod-uid".to_owned(),
            vec![pod.uid.clone()],
        );
    }
    if let Some(secret) = &secret {
        live(objects, "secrets", Some(namespace), secret)?;
    }
    if let Some(node) = &node {
        if pod.is_none() && secret.is_none() {
            live(objects, "nodes", None, node)?;
        }
        extra.insert(
            "authentication.kubernetes.io/node-name".to_owned(),
            vec![node.name.clone()],
        );
        if !node.uid.is_empty() {
            extra.insert(
                "authentication.kubernetes.io/node-uid".to_owned(),
                vec![node.uid.clone()],
            );
        }
    }
    if let Some(jti) = claims["jti"].as_str().filter(|j| !j.is_empty()) {
        extra.insert(
            "authentication.kubernetes.io/credential-id".to_owned(),
            vec![format!("JTI={jti}")],
        );
    }
    let mut user = account_user(namespace, &account);
    user.extra = extra;
    Ok(Validated {
        user,
        audiences: Some(audiences),
    })
}

/// Validates the claims of a legacy Secret token `token` (signature already verified).
pub(crate) fn validate_legacy(
    token: &str,
    claims: &Value,
    objects: &dyn ObjectLookup,
) -> Result<Validated, String> {
    let text = |claim: &str| claims[claim].as_str().unwrap_or_default().to_owned();
    let namespace = text("kubernetes.io/serviceaccount/namespace");
    let secret_name = text("kubernetes.io/serviceaccount/secret.name");
    let account = NameUid {
        name: text("kubernetes.io/serviceaccount/service-account.name"),
        uid: text("kubernetes.io/serviceaccount/service-account.uid"),
    };
    if namespace.is_empty() || secret_name.is_empty() || account.name.is_empty() {
        return Err("legacy token lacks its claims".into());
    }
    if claims["sub"].as_str() != Some(subject(&namespace, &account.name).as_str()) {
        return Err("token subject does not match its serviceaccount".into());
    }
    let secret = objects
        .object("secrets", Some(&namespace), &secret_name)
        .ok_or("the token's secret no longer exists")?;
    if !secret["metadata"]["deletionTimestamp"].is_null() {
        return Err("the token's secret is being deleted".into());
    }
    let held = secret["data"]["token"].as_str().and_then(|b| {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.decode(b).ok()
    });
    let matches = held.is_some_and(|held| {
        use subtle::ConstantTimeEq as _;
        bool::from(held.as_slice().ct_eq(token.as_bytes()))
    });
    if !matches {
        return Err("the token's secret holds another token".into());
    }
    live(objects, "serviceaccounts", Some(&namespace), &account)?;
    Ok(Validated {
        user: account_user(&namespace, &account),
        audiences: None,
    })
}

/// The user a ServiceAccount's token stands for.
fn account_user(namespace: &str, account: &NameUid) -> User {
    let mut user = User::new(
        subject(namespace, &account.name),
        [
            "system:serviceaccounts".to_owned(),
            format!("system:serviceaccounts:{namespace}"),
        ],
    );
    user.uid = account.uid.clone();
    user
}

fn name_uid(claim: &Value) -> Option<NameUid> {
    Some(NameUid {
        name: claim["name"].as_str().filter(|n| !n.is_empty())?.to_owned(),
        uid: claim["uid"].as_str().unwrap_or_default().to_owned(),
    })
}

/// Checks that `object` of `resource` exists with its uid (when the claim has one) and is not
/// being deleted.
fn live(
    objects: &dyn ObjectLookup,
    resource: &str,
    namespace: Option<&str>,
    object: &NameUid,
) -> Result<(), String> {
    let found = objects
        .object(resource, namespace, &object.name)
        .ok_or_else(|| format!("{resource} {:?} not found", object.name))?;
    let meta = &found["metadata"];
    if !object.uid.is_empty() && meta["uid"].as_str() != Some(object.uid.as_str()) {
        return Err(format!(
            "{resource} {:?} uid does not match the token",
            object.name
        ));
    }
    if !meta["deletionTimestamp"].is_null() {
        return Err(format!("{resource} {:?} is being deleted", object.name));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Objects(BTreeMap<(String, String), Value>);

    impl Objects {
        fn add(mut self, resource: &str, name: &str, object: Value) -> Self {
            self.0
                .insert((resource.to_owned(), name.to_owned()), object);
            self
        }
    }

    impl ObjectLookup for Objects {
        fn object(&self, resource: &str, _namespace: Option<&str>, name: &str) -> Option<Value> {
            self.0.get(&(resource.to_owned(), name.to_owned())).cloned()
        }
    }

    fn token(bound: Option<(BoundKind, NameUid)>) -> BoundToken {
        BoundToken {
            namespace: "ns".into(),
            service_account: NameUid {
                name: "sa".into(),
                uid: "sa-uid".into(),
            },
            audiences: vec!["api".into()],
            expiration_seconds: 600,
            bound,
            pod_node: None,
        }
    }

    fn issuers() -> Vec<String> {
        vec!["https://issuer".into()]
    }

    #[test]
    fn a_pod_bound_token_should_be_the_account_with_pod_extras_while_the_pod_lives() {
        let pod = NameUid {
            name: "p".into(),
            uid: "pod-uid".into(),
        };
        let (claims, jti) =
            bound_claims(&token(Some((BoundKind::Pod, pod))), "https://issuer", 1000);
        let objects = Objects::default()
            .add(
                "serviceaccounts",
                "sa",
                json!({"metadata": {"uid": "sa-uid"}}),
            )
            .add("pods", "p", json!({"metadata": {"uid": "pod-uid"}}));
        let ok = validate_bound(&claims, &issuers(), &objects, 1001).unwrap();
        assert_eq!(ok.user.name, "system:serviceaccount:ns:sa");
        assert_eq!(ok.user.uid, "sa-uid");
        assert_eq!(
            ok.user.groups,
            [
                "system:serviceaccounts",
                "system:serviceaccounts:ns",
                "system:authenticated"
            ]
        );
        assert_eq!(
            ok.user.extra["authentication.kubernetes.io/pod-name"],
            ["p"]
        );
        assert_eq!(
            ok.user.extra["authentication.kubernetes.io/credential-id"],
            [format!("JTI={jti}")]
        );
        assert_eq!(ok.audiences, Some(vec!["api".to_owned()]));

        let deleting = Objects::default()
            .add("serviceaccounts", "sa", json!({"metadata": {"uid": "sa-uid"}}))
            .add("pods", "p", json!({"metadata": {"uid": "pod-uid", "deletionTimestamp": "2026-01-01T00:00:00Z"}}));
        assert!(validate_bound(&claims, &issuers(), &deleting, 1001).is_err());
        let recreated = Objects::default()
            .add(
                "serviceaccounts",
                "sa",
                json!({"metadata": {"uid": "sa-uid"}}),
            )
            .add("pods", "p", json!({"metadata": {"uid": "other"}}));
        assert!(validate_bound(&claims, &issuers(), &recreated, 1001).is_err());
        let gone = Objects::default().add(
            "serviceaccounts",
            "sa",
            json!({"metadata": {"uid": "sa-uid"}}),
        );
        assert!(validate_bound(&claims, &issuers(), &gone, 1001).is_err());
    }

    #[test]
    fn time_issuer_and_account_should_be_checked() {
        let (claims, _) = bound_claims(&token(None), "https://issuer", 1000);
        let objects = Objects::default().add(
            "serviceaccounts",
            "sa",
            json!({"metadata": {"uid": "sa-uid"}}),
        );
        assert!(validate_bound(&claims, &issuers(), &objects, 1000 + 600 + 60).is_ok());
        assert!(validate_bound(&claims, &issuers(), &objects, 1000 + 600 + 61).is_err());
        assert!(validate_bound(&claims, &issuers(), &objects, 1000 - 61).is_err());
        assert!(validate_bound(&claims, &["https://other".to_owned()], &objects, 1000).is_err());
        let replaced =
            Objects::default().add("serviceaccounts", "sa", json!({"metadata": {"uid": "new"}}));
        assert!(validate_bound(&claims, &issuers(), &replaced, 1000).is_err());
    }

    #[test]
    fn jtis_should_be_random_uuids() {
        let (a, b) = (new_jti(), new_jti());
        assert_ne!(a, b);
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "4");
    }
}
