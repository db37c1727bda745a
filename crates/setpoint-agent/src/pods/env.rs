//! A container's process as its spec asks: the environment (`env` with `valueFrom`, `envFrom`,
//! `$(VAR)` references) and the command line (`command` + `args`, expanded), resolved the way
//! the kubelet resolves them — except that there is no image, so no image entrypoint, default
//! command or environment: a container without `command` runs its `args` (`args[0]` is the
//! program, as for an image without an entrypoint), `PATH` defaults to the usual system one
//! and `HOSTNAME` is the pod's name.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::{ConfigMap, Container, EnvVar, Pod, Secret};
use setpoint_runtime::Client;

/// `PATH` when the spec sets none.
const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Why a container's process cannot be made: reported as the container waiting with reason
/// `CreateContainerConfigError` and this message; retried at the next sync.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct ConfigError(pub(crate) String);

/// The resolved process of a container.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ProcessSpec {
    /// Program and arguments.
    pub(crate) argv: Vec<String>,
    /// The environment, in order.
    pub(crate) env: Vec<(String, String)>,
}

/// Resolves `container` of `pod`, reading the ConfigMaps and Secrets it refers to.
pub(crate) async fn resolve(
    client: &Client,
    pod: &Pod,
    container: &Container,
) -> Result<ProcessSpec, ConfigError> {
    // An image is never pulled, so it has no entrypoint: `command` (if any) then `args`.
    let command = container.command.as_deref().unwrap_or_default();
    let args = container.args.as_deref().unwrap_or_default();
    if command.is_empty() && args.is_empty() {
        return Err(ConfigError(format!(
            "setpoint runs processes, not images: container {} has no command and no args",
            container.name
        )));
    }
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    let mut sources = Sources {
        client,
        namespace,
        config_maps: HashMap::new(),
        secrets: HashMap::new(),
    };
    let mut env: Vec<(String, String)> = Vec::new();
    for from in container.env_from.iter().flatten() {
        let prefix = from.prefix.as_deref().unwrap_or("");
        if let Some(source) = &from.config_map_ref {
            let optional = source.optional.unwrap_or(false);
            if let Some(data) = sources.config_map(&source.name, optional).await? {
                for (k, v) in data {
                    set(&mut env, format!("{prefix}{k}"), v);
                }
            }
        }
        if let Some(source) = &from.secret_ref {
            let optional = source.optional.unwrap_or(false);
            if let Some(data) = sources.secret(&source.name, optional).await? {
                for (k, v) in data {
                    set(&mut env, format!("{prefix}{k}"), v);
                }
            }
        }
    }
    for var in container.env.iter().flatten() {
        if let Some(value) = value_of(&mut sources, pod, var, &env).await? {
            set(&mut env, var.name.clone(), value);
        }
    }
    let lookup = |name: &str| env.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
    let argv = command
        .iter()
        .chain(args)
        .map(|s| expand(s, &lookup))
        .collect();
    let has_path = lookup("PATH").is_some();
    let has_hostname = lookup("HOSTNAME").is_some();
    if !has_path {
        env.insert(0, ("PATH".to_owned(), DEFAULT_PATH.to_owned()));
    }
    if !has_hostname {
        let name = pod.metadata.name.clone().unwrap_or_default();
        env.insert(1, ("HOSTNAME".to_owned(), name));
    }
    Ok(ProcessSpec { argv, env })
}

/// Sets `name` (replacing an earlier value in place).
fn set(env: &mut Vec<(String, String)>, name: String, value: String) {
    match env.iter_mut().find(|(k, _)| *k == name) {
        Some(slot) => slot.1 = value,
        None => env.push((name, value)),
    }
}

/// The value of one `env` entry; `None` for an optional reference to something missing.
async fn value_of(
    sources: &mut Sources<'_>,
    pod: &Pod,
    var: &EnvVar,
    env: &[(String, String)],
) -> Result<Option<String>, ConfigError> {
    let Some(from) = &var.value_from else {
        let lookup = |name: &str| env.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
        return Ok(Some(expand(var.value.as_deref().unwrap_or(""), &lookup)));
    };
    if let Some(field) = &from.field_ref {
        return field_value(pod, &field.field_path).map(Some);
    }
    if let Some(key) = &from.config_map_key_ref {
        let optional = key.optional.unwrap_or(false);
        let Some(data) = sources.config_map(&key.name, optional).await? else {
            return Ok(None);
        };
        return match data.get(&key.key) {
            Some(v) => Ok(Some(v.clone())),
            None if optional => Ok(None),
            None => Err(ConfigError(format!(
                "couldn't find key {} in ConfigMap {}/{}",
                key.key, sources.namespace, key.name
            ))),
        };
    }
    if let Some(key) = &from.secret_key_ref {
        let optional = key.optional.unwrap_or(false);
        let Some(data) = sources.secret(&key.name, optional).await? else {
            return Ok(None);
        };
        return match data.get(&key.key) {
            Some(v) => Ok(Some(v.clone())),
            None if optional => Ok(None),
            None => Err(ConfigError(format!(
                "couldn't find key {} in Secret {}/{}",
                key.key, sources.namespace, key.name
            ))),
        };
    }
    Err(ConfigError(format!(
        "env {}: resourceFieldRef is not supported by setpoint's agent",
        var.name
    )))
}

/// The value of a `fieldRef` path.
pub(crate) fn field_value(pod: &Pod, path: &str) -> Result<String, ConfigError> {
    let meta = &pod.metadata;
    let spec = pod.spec.as_ref();
    let status = pod.status.as_ref();
    let quoted_key = |prefix: &str| {
        path.strip_prefix(prefix)?
            .strip_suffix("']")
            .map(str::to_owned)
    };
    let value = match path {
        "metadata.name" => meta.name.clone(),
        "metadata.namespace" => meta.namespace.clone(),
        "metadata.uid" => meta.uid.clone(),
        "spec.nodeName" => spec.and_then(|s| s.node_name.clone()),
        "spec.serviceAccountName" => spec.and_then(|s| s.service_account_name.clone()),
        "status.podIP" => status.and_then(|s| s.pod_ip.clone()),
        "status.hostIP" => status.and_then(|s| s.host_ip.clone()),
        "status.podIPs" => status.and_then(|s| s.pod_ips.as_ref()).map(|ips| {
            ips.iter()
                .map(|ip| ip.ip.clone())
                .collect::<Vec<_>>()
                .join(",")
        }),
        "status.hostIPs" => status.and_then(|s| s.host_ips.as_ref()).map(|ips| {
            ips.iter()
                .map(|ip| ip.ip.clone())
                .collect::<Vec<_>>()
                .join(",")
        }),
        _ => {
            if let Some(key) = quoted_key("metadata.labels['") {
                meta.labels.as_ref().and_then(|l| l.get(&key).cloned())
            } else if let Some(key) = quoted_key("metadata.annotations['") {
                meta.annotations.as_ref().and_then(|a| a.get(&key).cloned())
            } else {
                return Err(ConfigError(format!("unsupported fieldPath: {path}")));
            }
        }
    };
    Ok(value.unwrap_or_default())
}

/// Expands `$(VAR)` references with `lookup`, as Kubernetes does: `$$` is a literal `$`
/// (so `$$(VAR)` stays `$(VAR)`), and a reference to an unknown variable stays as written.
pub(crate) fn expand(input: &str, lookup: &dyn Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(input.len());
    let mut rest = input;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(open) = after.strip_prefix('(') {
            match open.find(')') {
                Some(close) => {
                    let name = &open[..close];
                    match lookup(name) {
                        Some(value) => out.push_str(&value),
                        None => {
                            out.push_str("$(");
                            out.push_str(name);
                            out.push(')');
                        }
                    }
                    rest = &open[close + 1..];
                }
                None => {
                    out.push_str("$(");
                    rest = open;
                }
            }
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// ConfigMaps and Secrets read for one container, each once.
struct Sources<'a> {
    client: &'a Client,
    namespace: &'a str,
    config_maps: HashMap<String, Option<std::collections::BTreeMap<String, String>>>,
    secrets: HashMap<String, Option<std::collections::BTreeMap<String, String>>>,
}

type Data = std::collections::BTreeMap<String, String>;

impl Sources<'_> {
    async fn config_map(
        &mut self,
        name: &str,
        optional: bool,
    ) -> Result<Option<Data>, ConfigError> {
        if !self.config_maps.contains_key(name) {
            let api = self.client.namespaced_api::<ConfigMap>(self.namespace);
            let found = api
                .get_opt(name)
                .await
                .map_err(|e| ConfigError(format!("reading configmap {name:?}: {e}")))?;
            self.config_maps
                .insert(name.to_owned(), found.map(|c| c.data.unwrap_or_default()));
        }
        match self.config_maps.get(name).cloned().flatten() {
            Some(data) => Ok(Some(data)),
            None if optional => Ok(None),
            None => Err(ConfigError(format!("configmap {name:?} not found"))),
        }
    }

    async fn secret(&mut self, name: &str, optional: bool) -> Result<Option<Data>, ConfigError> {
        if !self.secrets.contains_key(name) {
            let api = self.client.namespaced_api::<Secret>(self.namespace);
            let found = api
                .get_opt(name)
                .await
                .map_err(|e| ConfigError(format!("reading secret {name:?}: {e}")))?;
            let data = found.map(|s| {
                let mut data: Data = s.string_data.unwrap_or_default();
                for (k, v) in s.data.unwrap_or_default() {
                    data.insert(k, String::from_utf8_lossy(&v.0).into_owned());
                }
                data
            });
            self.secrets.insert(name.to_owned(), data);
        }
        match self.secrets.get(name).cloned().flatten() {
            Some(data) => Ok(Some(data)),
            None if optional => Ok(None),
            None => Err(ConfigError(format!("secret {name:?} not found"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup(name: &str) -> Option<String> {
        match name {
            "A" => Some("alpha".to_owned()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    #[test]
    fn expand_should_replace_known_references_and_keep_unknown_and_escaped_ones() {
        assert_eq!(expand("x$(A)y", &lookup), "xalphay");
        assert_eq!(expand("$(MISSING)", &lookup), "$(MISSING)");
        assert_eq!(expand("$$(A)", &lookup), "$(A)");
        assert_eq!(expand("$$", &lookup), "$");
        assert_eq!(expand("cost $5 $(EMPTY)!", &lookup), "cost $5 !");
        assert_eq!(expand("$(A", &lookup), "$(A");
        assert_eq!(expand("$(A)$(A)", &lookup), "alphaalpha");
    }

    #[test]
    fn field_value_should_read_names_labels_and_annotations() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u1",
                         "labels": {"app": "web"}, "annotations": {"a/b": "c"}},
            "spec": {"nodeName": "n1", "containers": []},
            "status": {"podIP": "10.0.0.1"}
        }))
        .expect("a pod");
        assert_eq!(field_value(&pod, "metadata.name"), Ok("p".to_owned()));
        assert_eq!(field_value(&pod, "metadata.uid"), Ok("u1".to_owned()));
        assert_eq!(
            field_value(&pod, "metadata.labels['app']"),
            Ok("web".to_owned())
        );
        assert_eq!(
            field_value(&pod, "metadata.annotations['a/b']"),
            Ok("c".to_owned())
        );
        assert_eq!(field_value(&pod, "spec.nodeName"), Ok("n1".to_owned()));
        assert_eq!(field_value(&pod, "status.podIP"), Ok("10.0.0.1".to_owned()));
        assert!(field_value(&pod, "spec.bogus").is_err());
    }
}
