//! ServiceAccount admission, as kube-apiserver's `ServiceAccount` plugin does it for a pod
//! being created:
//!
//! - `spec.serviceAccountName` defaults to `default` (or the deprecated `serviceAccount`), and
//!   `serviceAccount` is set to the same name, as the v1 API shows it;
//! - the ServiceAccount must exist: read from its watch cache, then from the store — ten
//!   times 100–200 ms apart for `default`, which the `serviceaccount` loop creates just after
//!   its namespace; otherwise 403 `error looking up service account NS/NAME: serviceaccount
//!   "NAME" not found`;
//! - unless `automountServiceAccountToken` is false on the pod (or, when the pod does not say,
//!   on the ServiceAccount), a projected volume `kube-api-access-<5 random characters>` (a
//!   token for the pod's ServiceAccount, `ca.crt` from the `kube-root-ca.crt` ConfigMap, the
//!   `namespace`) is added, and mounted read-only at
//!   `/var/run/secrets/kubernetes.io/serviceaccount` in every container and init container that
//!   has no mount at that path yet;
//! - the ServiceAccount's `imagePullSecrets` are copied to a pod that has none;
//! - a ServiceAccount annotated `kubernetes.io/enforce-mountable-secrets: "true"` refuses a
//!   pod using a Secret (volume, `secretKeyRef`, pull secret) it does not list;
//! - a mirror pod (`kubernetes.io/config.mirror`) is left alone but may not name a
//!   ServiceAccount, Secrets or token projections.
//!
//! The plugin is on in `setpoint server` ([`Api::enable_service_account_admission`]); an
//! [`Api`] built alone (tests without the `serviceaccount` loop) does not run it, as
//! kube-apiserver's test servers disable it.

use std::sync::atomic::Ordering;
use std::time::Duration;

use rand::Rng;
use serde_json::{json, Map, Value};

use crate::api::{Api, Served};

/// The ServiceAccount a pod that names none runs as.
pub(super) const DEFAULT_SERVICE_ACCOUNT: &str = "default";
/// Where the token volume is mounted in each container.
pub(crate) const TOKEN_MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// The token volume's name, before its random suffix.
const VOLUME_PREFIX: &str = "kube-api-access-";
/// The lifetime the token volume asks for: an hour and seven seconds, the number by which
/// kube-apiserver recognises the tokens of these volumes.
const TOKEN_EXPIRATION_SECONDS: i64 = 3607;
const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";
const ENFORCE_MOUNTABLE_SECRETS: &str = "kubernetes.io/enforce-mountable-secrets";
/// How many times a missing `default` ServiceAccount is looked for in the store.
const DEFAULT_ATTEMPTS: u32 = 10;

impl Api {
    /// Turns on ServiceAccount admission for pods created from now on (kube-apiserver's
    /// `ServiceAccount` plugin; module docs of `admission/builtin/service_account.rs`).
    /// `setpoint server` calls it: its `serviceaccount` loop creates each namespace's `default`
    /// ServiceAccount, which pods need.
    pub fn enable_service_account_admission(&self) {
        super::super::state(self)
            .service_accounts
            .store(true, Ordering::Relaxed);
    }
}

/// Whether ServiceAccount admission is on for `api`.
pub(in crate::admission) fn enabled(api: &Api) -> bool {
    super::super::state(api)
        .service_accounts
        .load(Ordering::Relaxed)
}

/// Defaults the ServiceAccount of a pod being created in `namespace` and mounts its token;
/// whether the pod changed. `Err` is why the pod is refused.
pub(super) async fn admit(
    served: &Served,
    namespace: &str,
    pod: &mut Value,
) -> Result<bool, String> {
    if is_mirror(pod) {
        return Ok(false);
    }
    let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else {
        return Ok(false);
    };
    let named = |spec: &Map<String, Value>, field: &str| {
        spec.get(field)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    let name = named(spec, "serviceAccountName")
        .or_else(|| named(spec, "serviceAccount"))
        .unwrap_or_else(|| DEFAULT_SERVICE_ACCOUNT.to_owned());
    let mut changed = false;
    for field in ["serviceAccountName", "serviceAccount"] {
        if named(spec, field).as_deref() != Some(name.as_str()) {
            spec.insert(field.into(), json!(name));
            changed = true;
        }
    }
    let account = service_account(served, namespace, &name).await?;
    if automount(&account, spec) {
        changed |= mount_token(spec);
    }
    let pull_secrets = &account["imagePullSecrets"];
    let has_own = spec
        .get("imagePullSecrets")
        .and_then(Value::as_array)
        .is_some_and(|l| !l.is_empty());
    if !has_own && pull_secrets.as_array().is_some_and(|l| !l.is_empty()) {
        let names: Vec<Value> = pull_secrets
            .as_array()
            .into_iter()
            .flatten()
            .map(|s| json!({"name": s["name"]}))
            .collect();
        spec.insert("imagePullSecrets".into(), Value::Array(names));
        changed = true;
    }
    Ok(changed)
}

/// Checks a pod being created (after the mutating webhooks): its ServiceAccount exists and
/// allows its Secrets; a mirror pod references none of them.
pub(super) async fn validate(served: &Served, namespace: &str, pod: &Value) -> Result<(), String> {
    if is_mirror(pod) {
        return mirror_problem(pod).map_or(Ok(()), Err);
    }
    let name = pod["spec"]["serviceAccountName"]
        .as_str()
        .filter(|s| !s.is_empty())
        .unwrap_or(DEFAULT_SERVICE_ACCOUNT);
    let account = service_account(served, namespace, name).await?;
    let enforced = account["metadata"]["annotations"][ENFORCE_MOUNTABLE_SECRETS]
        .as_str()
        .is_some_and(|v| matches!(v, "true" | "1" | "t" | "T" | "TRUE" | "True"));
    if enforced {
        if let Some(why) = unlisted_secret(&account, &pod["spec"]) {
            return Err(why);
        }
    }
    Ok(())
}

/// The ServiceAccount `namespace/name`: from its watch cache, else from the store (retried
/// for `default`, which its loop may be about to create).
async fn service_account(served: &Served, namespace: &str, name: &str) -> Result<Value, String> {
    let error = |why: String| format!("error looking up service account {namespace}/{name}: {why}");
    let Some(store) = served.store("", "v1", "serviceaccounts") else {
        return Err(error("serviceaccounts are not served".to_owned()));
    };
    let key = store.def.key(Some(namespace), name);
    let (objects, _) = store.cache().snapshot();
    if let Some(found) = objects.get(key.as_bytes()) {
        if let Ok(account) = serde_json::from_slice(&found.json.bytes()) {
            return Ok(account);
        }
    }
    let attempts = if name == DEFAULT_SERVICE_ACCOUNT {
        DEFAULT_ATTEMPTS
    } else {
        1
    };
    let interval = Duration::from_millis(rand::thread_rng().gen_range(100..200));
    for attempt in 0..attempts {
        if attempt > 0 {
            tokio::time::sleep(interval).await;
        }
        match store.get(Some(namespace), name).await {
            Ok(account) => return Ok(account),
            Err(e) if e.reason == setpoint_core::Reason::NotFound => {}
            Err(e) => return Err(error(e.message)),
        }
    }
    Err(error(format!("serviceaccount {name:?} not found")))
}

/// The pod's `automountServiceAccountToken` if it says, else the ServiceAccount's, else true.
fn automount(account: &Value, spec: &Map<String, Value>) -> bool {
    spec.get("automountServiceAccountToken")
        .and_then(Value::as_bool)
        .or_else(|| account["automountServiceAccountToken"].as_bool())
        .unwrap_or(true)
}

/// Adds the token volume (unless one is there) and its mount to every container without a
/// mount at [`TOKEN_MOUNT_PATH`]; whether anything was added.
fn mount_token(spec: &mut Map<String, Value>) -> bool {
    let existing = spec
        .get("volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| v["name"].as_str())
        .find(|n| n.starts_with(VOLUME_PREFIX))
        .map(str::to_owned);
    let volume_name = existing
        .clone()
        .unwrap_or_else(|| crate::registry::meta::generate_name(VOLUME_PREFIX));
    let mount = json!({"name": volume_name, "readOnly": true, "mountPath": TOKEN_MOUNT_PATH});
    let mut mounted = false;
    for list in ["initContainers", "containers"] {
        let Some(containers) = spec.get_mut(list).and_then(Value::as_array_mut) else {
            continue;
        };
        for container in containers.iter_mut().filter_map(Value::as_object_mut) {
            let mounts = container.entry("volumeMounts").or_insert_with(|| json!([]));
            if mounts.is_null() {
                *mounts = json!([]);
            }
            let Some(mounts) = mounts.as_array_mut() else {
                continue;
            };
            if mounts.iter().any(|m| m["mountPath"] == TOKEN_MOUNT_PATH) {
                continue;
            }
            mounts.push(mount.clone());
            mounted = true;
        }
    }
    if mounted && existing.is_none() {
        let volumes = spec.entry("volumes").or_insert_with(|| json!([]));
        if !volumes.is_array() {
            *volumes = json!([]);
        }
        if let Some(volumes) = volumes.as_array_mut() {
            volumes.push(token_volume(&volume_name));
        }
    }
    mounted
}

/// The projected volume of a pod's API credentials: token, cluster CA, namespace.
fn token_volume(name: &str) -> Value {
    json!({"name": name, "projected": {"defaultMode": 420, "sources": [
        {"serviceAccountToken": {"expirationSeconds": TOKEN_EXPIRATION_SECONDS, "path": "token"}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace",
            "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}
    ]}})
}

fn is_mirror(pod: &Value) -> bool {
    pod["metadata"]["annotations"][MIRROR_ANNOTATION].is_string()
}

/// What a mirror pod may not reference.
fn mirror_problem(pod: &Value) -> Option<String> {
    let spec = &pod["spec"];
    if spec["serviceAccountName"]
        .as_str()
        .is_some_and(|s| !s.is_empty())
    {
        return Some("a mirror pod may not reference service accounts".to_owned());
    }
    if !secrets_of(spec).is_empty() {
        return Some("a mirror pod may not reference secrets".to_owned());
    }
    let projects_token = spec["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|v| v["projected"]["sources"].as_array().into_iter().flatten())
        .any(|s| s["serviceAccountToken"].is_object());
    projects_token
        .then(|| "a mirror pod may not use ServiceAccountToken volume projections".to_owned())
}

/// Every Secret the pod spec names (volumes, projected volumes, env, pull secrets).
fn secrets_of(spec: &Value) -> Vec<String> {
    let mut names = Vec::new();
    let mut push = |v: &Value| {
        if let Some(n) = v.as_str().filter(|n| !n.is_empty()) {
            names.push(n.to_owned());
        }
    };
    for volume in spec["volumes"].as_array().into_iter().flatten() {
        push(&volume["secret"]["secretName"]);
        for source in volume["projected"]["sources"]
            .as_array()
            .into_iter()
            .flatten()
        {
            push(&source["secret"]["name"]);
        }
    }
    for list in ["initContainers", "containers"] {
        for c in spec[list].as_array().into_iter().flatten() {
            for env in c["env"].as_array().into_iter().flatten() {
                push(&env["valueFrom"]["secretKeyRef"]["name"]);
            }
            for from in c["envFrom"].as_array().into_iter().flatten() {
                push(&from["secretRef"]["name"]);
            }
        }
    }
    for s in spec["imagePullSecrets"].as_array().into_iter().flatten() {
        push(&s["name"]);
    }
    names
}

/// Why a pod may not use a Secret its ServiceAccount does not list, as kube words it.
fn unlisted_secret(account: &Value, spec: &Value) -> Option<String> {
    let listed = |field: &str| -> Vec<String> {
        account[field]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s["name"].as_str().map(str::to_owned))
            .collect()
    };
    let mountable = listed("secrets");
    let sa = account["metadata"]["name"].as_str().unwrap_or_default();
    for volume in spec["volumes"].as_array().into_iter().flatten() {
        if let Some(secret) = volume["secret"]["secretName"].as_str() {
            if !mountable.iter().any(|m| m == secret) {
                return Some(format!("volume with secret.secretName=\"{secret}\" is not allowed because service account {sa} does not reference that secret"));
            }
        }
    }
    for (list, what) in [
        ("initContainers", "init container"),
        ("containers", "container"),
    ] {
        for c in spec[list].as_array().into_iter().flatten() {
            for env in c["env"].as_array().into_iter().flatten() {
                let Some(secret) = env["valueFrom"]["secretKeyRef"]["name"].as_str() else {
                    continue;
                };
                if !mountable.iter().any(|m| m == secret) {
                    let (container, var) = (
                        c["name"].as_str().unwrap_or_default(),
                        env["name"].as_str().unwrap_or_default(),
                    );
                    return Some(format!("{what} {container} with envVar {var} referencing secret.secretName=\"{secret}\" is not allowed because service account {sa} does not reference that secret"));
                }
            }
        }
    }
    let pull = listed("imagePullSecrets");
    for (i, s) in spec["imagePullSecrets"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let name = s["name"].as_str().unwrap_or_default();
        if !pull.iter().any(|p| p == name) {
            return Some(format!("imagePullSecrets[{i}].name=\"{name}\" is not allowed because service account {sa} does not reference that imagePullSecret"));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(v: Value) -> Map<String, Value> {
        v.as_object().cloned().expect("an object")
    }

    #[test]
    fn token_should_be_mounted_in_every_container_once() {
        let mut s = spec(json!({
            "initContainers": [{"name": "i"}],
            "containers": [{"name": "a"}, {"name": "b", "volumeMounts": [
                {"name": "own", "mountPath": TOKEN_MOUNT_PATH}]}],
            "volumes": [{"name": "own", "emptyDir": {}}]
        }));
        assert!(mount_token(&mut s));
        let volumes = s["volumes"].as_array().expect("volumes");
        assert_eq!(volumes.len(), 2);
        let name = volumes[1]["name"].as_str().expect("a name");
        assert!(
            name.starts_with("kube-api-access-") && name.len() == 21,
            "{name}"
        );
        let sources = &volumes[1]["projected"]["sources"];
        assert_eq!(sources[0]["serviceAccountToken"]["expirationSeconds"], 3607);
        assert_eq!(sources[1]["configMap"]["name"], "kube-root-ca.crt");
        assert_eq!(sources[2]["downwardAPI"]["items"][0]["path"], "namespace");
        let expected = json!({"name": name, "readOnly": true, "mountPath": TOKEN_MOUNT_PATH});
        assert_eq!(s["initContainers"][0]["volumeMounts"], json!([expected]));
        assert_eq!(s["containers"][0]["volumeMounts"], json!([expected]));
        // The container with its own mount at the path keeps only that one.
        assert_eq!(
            s["containers"][1]["volumeMounts"].as_array().map(Vec::len),
            Some(1)
        );
        // Again: nothing to add.
        assert!(!mount_token(&mut s));
        assert_eq!(s["volumes"].as_array().map(Vec::len), Some(2));
    }

    #[test]
    fn a_pod_mounting_the_path_everywhere_should_get_no_volume() {
        let mut s = spec(json!({"containers": [{"name": "a", "volumeMounts": [
            {"name": "own", "mountPath": TOKEN_MOUNT_PATH}]}]}));
        assert!(!mount_token(&mut s));
        assert!(s.get("volumes").is_none());
    }

    #[test]
    fn automount_should_follow_the_pod_then_the_service_account() {
        let sa_off = json!({"automountServiceAccountToken": false});
        let sa_unset = json!({});
        assert!(automount(&sa_unset, &spec(json!({}))));
        assert!(!automount(&sa_off, &spec(json!({}))));
        assert!(automount(
            &sa_off,
            &spec(json!({"automountServiceAccountToken": true}))
        ));
        assert!(!automount(
            &sa_unset,
            &spec(json!({"automountServiceAccountToken": false}))
        ));
    }

    #[test]
    fn enforced_service_accounts_should_refuse_unlisted_secrets() {
        let account = json!({"metadata": {"name": "sa"}, "secrets": [{"name": "ok"}],
            "imagePullSecrets": [{"name": "pull"}]});
        let volume =
            |secret: &str| json!({"volumes": [{"name": "v", "secret": {"secretName": secret}}]});
        assert_eq!(unlisted_secret(&account, &volume("ok")), None);
        assert_eq!(
            unlisted_secret(&account, &volume("other")).as_deref(),
            Some("volume with secret.secretName=\"other\" is not allowed because service account sa does not reference that secret")
        );
        let env = json!({"containers": [{"name": "c", "env": [{"name": "X",
            "valueFrom": {"secretKeyRef": {"name": "other", "key": "k"}}}]}]});
        assert_eq!(
            unlisted_secret(&account, &env).as_deref(),
            Some("container c with envVar X referencing secret.secretName=\"other\" is not allowed because service account sa does not reference that secret")
        );
        let pull = json!({"imagePullSecrets": [{"name": "pull"}, {"name": "nope"}]});
        assert_eq!(
            unlisted_secret(&account, &pull).as_deref(),
            Some("imagePullSecrets[1].name=\"nope\" is not allowed because service account sa does not reference that imagePullSecret")
        );
    }

    #[test]
    fn mirror_pods_should_reference_no_credentials() {
        let mirror = |spec: Value| json!({"metadata": {"annotations": {MIRROR_ANNOTATION: "x"}}, "spec": spec});
        assert_eq!(mirror_problem(&mirror(json!({"containers": []}))), None);
        assert_eq!(
            mirror_problem(&mirror(json!({"serviceAccountName": "a"}))).as_deref(),
            Some("a mirror pod may not reference service accounts")
        );
        assert_eq!(
            mirror_problem(&mirror(
                json!({"volumes": [{"name": "v", "secret": {"secretName": "s"}}]})
            ))
            .as_deref(),
            Some("a mirror pod may not reference secrets")
        );
        assert_eq!(
            mirror_problem(&mirror(
                json!({"volumes": [{"name": "v", "projected": {"sources": [
                {"serviceAccountToken": {"path": "t"}}]}}]})
            ))
            .as_deref(),
            Some("a mirror pod may not use ServiceAccountToken volume projections")
        );
    }
}
