//! The payloads of the volumes made of API data — `configMap`, `secret`, `downwardAPI` and
//! `projected` — computed from the pod and the objects it names, as the kubelet computes
//! them: `items` select and rename keys, `defaultMode`/`mode` set permissions (0644 unless
//! said otherwise), a missing object or key fails the mount unless `optional`.
//!
//! A `projected` volume's `serviceAccountToken` source is a token of the pod's ServiceAccount
//! bound to the pod (`token.rs`), written with the volume's `defaultMode`, or `0600` when the
//! pod sets `fsGroup` or `runAsUser` (the fsGroup then adds group read, as the kubelet's
//! ownership management does). `clusterTrustBundle` sources are not served: they are skipped
//! and reported (see [`Rendered::skipped`]).

use std::collections::BTreeMap;
use std::fmt::Debug;

use k8s_openapi::api::core::v1::{
    ConfigMap, DownwardAPIVolumeFile, KeyToPath, Pod, ResourceFieldSelector, Secret,
};
use k8s_openapi::NamespaceResourceScope;
use kube::Resource;
use serde::de::DeserializeOwned;
use setpoint_runtime::Client;

use super::atomic::{FileContent, Payload};

/// The mode of a volume's files when neither `defaultMode` nor `mode` says.
const DEFAULT_MODE: i32 = 0o644;

/// Why a volume's payload cannot be made: the pod waits (`FailedMount`) and it is retried.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct SourceError(pub(crate) String);

/// Where ConfigMaps and Secrets are read: the API, one object at a time. The agent acts as its
/// node, which may read only the objects its pods reference (the node authorizer), so it keeps
/// no cache of every ConfigMap and Secret; the pods' periodic resync picks up changes. Also
/// where ServiceAccount tokens come from.
#[derive(Debug, Clone)]
pub(crate) struct ObjectSources {
    /// The API.
    pub(crate) client: Client,
    /// The tokens of `serviceAccountToken` projections.
    pub(crate) tokens: super::token::ServiceAccountTokens,
}

/// Key → bytes of one ConfigMap or Secret.
type Data = BTreeMap<String, Vec<u8>>;

impl ObjectSources {
    async fn config_map(&self, namespace: &str, name: &str) -> Result<Option<Data>, SourceError> {
        let found = self.read::<ConfigMap>("configmap", namespace, name).await?;
        Ok(found.map(|c| {
            let mut data: Data = c
                .data
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| (k, v.into_bytes()))
                .collect();
            for (k, v) in c.binary_data.unwrap_or_default() {
                data.insert(k, v.0);
            }
            data
        }))
    }

    async fn secret(&self, namespace: &str, name: &str) -> Result<Option<Data>, SourceError> {
        let found = self.read::<Secret>("secret", namespace, name).await?;
        Ok(found.map(|s| {
            let mut data: Data = s
                .string_data
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| (k, v.into_bytes()))
                .collect();
            for (k, v) in s.data.unwrap_or_default() {
                data.insert(k, v.0);
            }
            data
        }))
    }

    /// Adds the keys of `object` (of `namespace`) to `payload`, as `items` select them.
    async fn add_keyed(
        &self,
        payload: &mut Payload,
        namespace: &str,
        object: Object<'_>,
        items: Option<&[KeyToPath]>,
        optional: Option<bool>,
        mode: Option<i32>,
    ) -> Result<(), SourceError> {
        let (data, kind) = match object {
            Object::ConfigMap(name) => (
                self.config_map(namespace, name).await?,
                format!("configmap {name:?}"),
            ),
            Object::Secret(name) => (
                self.secret(namespace, name).await?,
                format!("secret {name:?}"),
            ),
        };
        keyed(payload, &kind, data, items, optional, mode)
    }

    /// The object `namespace/name` from the API.
    async fn read<K>(
        &self,
        kind: &str,
        namespace: &str,
        name: &str,
    ) -> Result<Option<K>, SourceError>
    where
        K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
            + Clone
            + Debug
            + DeserializeOwned,
    {
        self.client
            .namespaced_api::<K>(namespace)
            .get_opt(name)
            .await
            .map_err(|e| SourceError(format!("reading {kind} {name:?}: {e}")))
    }
}

/// The ConfigMap or Secret (by name) a keyed volume source reads.
#[derive(Debug, Clone, Copy)]
enum Object<'a> {
    ConfigMap(&'a str),
    Secret(&'a str),
}

/// A rendered payload, and what of the volume's spec was skipped (and why).
#[derive(Debug, Default)]
pub(crate) struct Rendered {
    /// The files.
    pub(crate) payload: Payload,
    /// Sources left out, each with the reason (reported as a pod event).
    pub(crate) skipped: Vec<String>,
}

/// The payload of an API-data volume; `None` if the volume is of another kind.
pub(crate) async fn render(
    sources: &ObjectSources,
    pod: &Pod,
    volume: &k8s_openapi::api::core::v1::Volume,
) -> Result<Option<Rendered>, SourceError> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    let mut out = Rendered::default();
    if let Some(cm) = &volume.config_map {
        sources
            .add_keyed(
                &mut out.payload,
                namespace,
                Object::ConfigMap(&cm.name),
                cm.items.as_deref(),
                cm.optional,
                cm.default_mode,
            )
            .await?;
    } else if let Some(secret) = &volume.secret {
        sources
            .add_keyed(
                &mut out.payload,
                namespace,
                Object::Secret(secret.secret_name.as_deref().unwrap_or_default()),
                secret.items.as_deref(),
                secret.optional,
                secret.default_mode,
            )
            .await?;
    } else if let Some(downward) = &volume.downward_api {
        downward_api(
            &mut out.payload,
            pod,
            downward.items.as_deref().unwrap_or_default(),
            downward.default_mode,
        )?;
    } else if let Some(projected) = &volume.projected {
        let default_mode = projected.default_mode;
        for source in projected.sources.iter().flatten() {
            if let Some(cm) = &source.config_map {
                sources
                    .add_keyed(
                        &mut out.payload,
                        namespace,
                        Object::ConfigMap(&cm.name),
                        cm.items.as_deref(),
                        cm.optional,
                        default_mode,
                    )
                    .await?;
            }
            if let Some(secret) = &source.secret {
                sources
                    .add_keyed(
                        &mut out.payload,
                        namespace,
                        Object::Secret(&secret.name),
                        secret.items.as_deref(),
                        secret.optional,
                        default_mode,
                    )
                    .await?;
            }
            if let Some(downward) = &source.downward_api {
                downward_api(
                    &mut out.payload,
                    pod,
                    downward.items.as_deref().unwrap_or_default(),
                    default_mode,
                )?;
            }
            if let Some(projection) = &source.service_account_token {
                let token = sources.tokens.token(pod, projection).await?;
                out.payload.insert(
                    projection.path.clone(),
                    FileContent {
                        data: token.into_bytes(),
                        mode: token_mode(pod, default_mode),
                    },
                );
            }
            if source.cluster_trust_bundle.is_some() {
                out.skipped.push(format!(
                    "volume {:?}: clusterTrustBundle projections are not supported; left out",
                    volume.name
                ));
            }
        }
    } else {
        return Ok(None);
    }
    Ok(Some(out))
}

/// A ConfigMap's or Secret's keys as files: all of them, or the `items`.
fn keyed(
    payload: &mut Payload,
    kind: &str,
    data: Option<Data>,
    items: Option<&[KeyToPath]>,
    optional: Option<bool>,
    default_mode: Option<i32>,
) -> Result<(), SourceError> {
    let optional = optional.unwrap_or(false);
    let Some(data) = data else {
        if optional {
            return Ok(());
        }
        return Err(SourceError(format!("{kind} not found")));
    };
    let mode = mode_bits(default_mode);
    match items {
        None | Some([]) => {
            for (key, bytes) in data {
                payload.insert(key, FileContent { data: bytes, mode });
            }
        }
        Some(items) => {
            for item in items {
                let Some(bytes) = data.get(&item.key) else {
                    if optional {
                        continue;
                    }
                    return Err(SourceError(format!(
                        "configured to use key {:?} of {kind}, which has no such key",
                        item.key
                    )));
                };
                let mode = item.mode.map_or(mode, |m| mode_bits(Some(m)));
                payload.insert(
                    item.path.clone(),
                    FileContent {
                        data: bytes.clone(),
                        mode,
                    },
                );
            }
        }
    }
    Ok(())
}

/// A token file's mode: `0600` when the pod sets `fsGroup` or `runAsUser`, else the volume's.
fn token_mode(pod: &Pod, default_mode: Option<i32>) -> u32 {
    let context = pod.spec.as_ref().and_then(|s| s.security_context.as_ref());
    if context.is_some_and(|c| c.fs_group.is_some() || c.run_as_user.is_some()) {
        0o600
    } else {
        mode_bits(default_mode)
    }
}

fn mode_bits(mode: Option<i32>) -> u32 {
    u32::try_from(mode.unwrap_or(DEFAULT_MODE)).unwrap_or(0o644) & 0o777
}

/// The downward API's files.
fn downward_api(
    payload: &mut Payload,
    pod: &Pod,
    items: &[DownwardAPIVolumeFile],
    default_mode: Option<i32>,
) -> Result<(), SourceError> {
    for item in items {
        let text = if let Some(field) = &item.field_ref {
            field_text(pod, &field.field_path)?
        } else if let Some(resource) = &item.resource_field_ref {
            resource_text(pod, resource)?
        } else {
            return Err(SourceError(format!(
                "downwardAPI item {:?} has neither fieldRef nor resourceFieldRef",
                item.path
            )));
        };
        let mode = mode_bits(item.mode.or(default_mode));
        payload.insert(
            item.path.clone(),
            FileContent {
                data: text.into_bytes(),
                mode,
            },
        );
    }
    Ok(())
}

/// A `fieldRef` as file content: `metadata.labels`/`annotations` whole as sorted
/// `key="value"` lines (values quoted as Go quotes strings), anything else as for env vars.
fn field_text(pod: &Pod, path: &str) -> Result<String, SourceError> {
    let map = match path {
        "metadata.labels" => Some(pod.metadata.labels.clone().unwrap_or_default()),
        "metadata.annotations" => Some(pod.metadata.annotations.clone().unwrap_or_default()),
        _ => None,
    };
    if let Some(map) = map {
        return Ok(map
            .iter()
            .map(|(k, v)| format!("{k}={}", serde_json::Value::String(v.clone())))
            .collect::<Vec<_>>()
            .join("\n"));
    }
    crate::pods::field_value(pod, path).map_err(|e| SourceError(e.0))
}

/// A `resourceFieldRef` as file content: the container's limit or request in units of the
/// divisor, rounded up; an unset limit is the node's capacity, as the kubelet reports it.
fn resource_text(pod: &Pod, field: &ResourceFieldSelector) -> Result<String, SourceError> {
    let containers = pod.spec.iter().flat_map(|s| {
        s.containers
            .iter()
            .chain(s.init_containers.iter().flatten())
    });
    let container = match &field.container_name {
        Some(name) => containers
            .into_iter()
            .find(|c| &c.name == name)
            .ok_or_else(|| SourceError(format!("resourceFieldRef: no container {name:?}")))?,
        None => containers
            .into_iter()
            .next()
            .ok_or_else(|| SourceError("resourceFieldRef: the pod has no container".to_owned()))?,
    };
    let (kind, resource) = field
        .resource
        .split_once('.')
        .ok_or_else(|| SourceError(format!("unsupported resource {:?}", field.resource)))?;
    let resources = container.resources.as_ref();
    let declared = match kind {
        "limits" => resources.and_then(|r| r.limits.as_ref()),
        "requests" => resources.and_then(|r| r.requests.as_ref()),
        _ => {
            return Err(SourceError(format!(
                "unsupported resource {:?}",
                field.resource
            )))
        }
    }
    .and_then(|m| m.get(resource).cloned());
    let quantity = match declared {
        Some(q) => q,
        None if kind == "limits" => crate::node::machine_capacity()
            .get(resource)
            .cloned()
            .ok_or_else(|| SourceError(format!("unsupported resource {:?}", field.resource)))?,
        None => k8s_openapi::apimachinery::pkg::api::resource::Quantity("0".to_owned()),
    };
    let divisor = field.divisor.as_ref().map_or("1", |d| d.0.as_str());
    let value = setpoint_core::quantity::milli_value(&quantity.0)
        .ok_or_else(|| SourceError(format!("invalid quantity {:?}", quantity.0)))?;
    let unit = setpoint_core::quantity::milli_value(divisor)
        .filter(|u| *u > 0)
        .ok_or_else(|| SourceError(format!("invalid divisor {divisor:?}")))?;
    Ok(setpoint_core::quantity::ceil_div(value, unit).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod() -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u1",
                         "labels": {"b": "2", "a": "1"}},
            "spec": {"containers": [{"name": "c", "resources": {
                "limits": {"cpu": "500m", "memory": "64Mi"}}}]}
        }))
        .expect("a pod")
    }

    #[test]
    fn downward_api_should_write_labels_sorted_and_resources_in_divisor_units() {
        let items: Vec<DownwardAPIVolumeFile> = serde_json::from_value(serde_json::json!([
            {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
            {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}},
            {"path": "cpu", "resourceFieldRef": {"resource": "limits.cpu", "divisor": "1m"}},
            {"path": "cpu-cores", "resourceFieldRef": {"resource": "limits.cpu"}},
            {"path": "mem", "resourceFieldRef": {"containerName": "c", "resource": "limits.memory", "divisor": "1Mi"}},
        ]))
        .expect("items");
        let mut payload = Payload::new();
        downward_api(&mut payload, &pod(), &items, Some(0o600)).expect("rendered");
        let text = |k: &str| String::from_utf8(payload[k].data.clone()).expect("utf8");
        assert_eq!(text("labels"), "a=\"1\"\nb=\"2\"");
        assert_eq!(text("name"), "p");
        assert_eq!(text("cpu"), "500");
        assert_eq!(text("cpu-cores"), "1");
        assert_eq!(text("mem"), "64");
        assert_eq!(payload["name"].mode, 0o600);
    }

    #[test]
    fn keyed_should_select_items_and_fail_on_missing_unless_optional() {
        let data: Data = [
            ("a".to_owned(), b"1".to_vec()),
            ("b".to_owned(), b"2".to_vec()),
        ]
        .into_iter()
        .collect();
        let items: Vec<KeyToPath> = serde_json::from_value(serde_json::json!([
            {"key": "a", "path": "dir/x", "mode": 0o400}
        ]))
        .expect("items");
        let mut payload = Payload::new();
        keyed(
            &mut payload,
            "cm",
            Some(data.clone()),
            Some(&items),
            None,
            None,
        )
        .expect("ok");
        assert_eq!(payload.len(), 1);
        assert_eq!(payload["dir/x"].mode, 0o400);
        let missing: Vec<KeyToPath> =
            serde_json::from_value(serde_json::json!([{"key": "zz", "path": "z"}])).expect("items");
        assert!(keyed(&mut payload, "cm", Some(data), Some(&missing), None, None).is_err());
        assert!(keyed(&mut payload, "cm", None, None, None, None).is_err());
        assert!(keyed(&mut payload, "cm", None, None, Some(true), None).is_ok());
    }
}
