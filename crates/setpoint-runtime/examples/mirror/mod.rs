//! The ConfigMap mirror: for every ConfigMap `x` labelled `mirror.setpoint.dev/enabled=true`,
//! keep a ConfigMap `x-mirror` beside it holding the same data, owned by `x` (an ownerReference
//! with `controller: true`, so deleting `x` deletes its mirror through garbage collection and
//! any change to the mirror reconciles `x` again).
//!
//! Shared by the `configmap_mirror` (in-process) and `configmap_mirror_remote` (kubeconfig)
//! examples and by Setpoint's own tests: one reconciler, two transports.

#![allow(
    unreachable_pub,
    dead_code,
    reason = "included by path into several examples and tests; not each uses every item"
)]

use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ObjectMeta, PostParams};
use kube::Resource;
use setpoint_runtime::{
    Action, Client, Controller, InformerFactory, ObjectCache, ObjectKey, Predicate,
};

/// The label that asks for a mirror.
pub const ENABLED_LABEL: &str = "mirror.setpoint.dev/enabled";
/// The label every mirror carries, naming its source.
pub const MIRROR_OF_LABEL: &str = "mirror.setpoint.dev/of";

/// What the reconciler needs: a client to write with, and the shared ConfigMap cache to read
/// the current mirrors from.
pub struct Mirror {
    /// Writes go through the API.
    pub client: Client,
    /// The cache of every ConfigMap (the same informer the controller watches with).
    pub configmaps: ObjectCache<ConfigMap>,
}

/// Errors of one reconcile: the API said no. Retried with backoff by the controller.
#[derive(Debug, thiserror::Error)]
pub enum MirrorError {
    /// A write failed.
    #[error("writing mirror {key}: {source}")]
    Write {
        /// The mirror.
        key: String,
        /// What the API answered.
        #[source]
        source: kube::Error,
    },
}

/// The mirror's name for a source ConfigMap.
pub fn mirror_name(source: &str) -> String {
    format!("{source}-mirror")
}

/// The controller: ConfigMaps that ask for a mirror, and the mirrors they own.
pub fn controller(factory: &InformerFactory) -> Controller<ConfigMap> {
    Controller::<ConfigMap>::new(factory)
        .named("configmap-mirror")
        .owns::<ConfigMap>()
        .predicate(Predicate::new(|_old, new: &ConfigMap| wants_mirror(new)))
}

fn wants_mirror(cm: &ConfigMap) -> bool {
    cm.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(ENABLED_LABEL))
        .is_some_and(|v| v == "true")
}

/// Brings `source`'s mirror in line with it: creates it if missing, rewrites its data if it
/// drifted. Idempotent: with the mirror right, it writes nothing.
pub async fn reconcile(source: Arc<ConfigMap>, ctx: Arc<Mirror>) -> Result<Action, MirrorError> {
    if !wants_mirror(&source) || source.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let (Some(ns), Some(name)) = (&source.metadata.namespace, &source.metadata.name) else {
        return Ok(Action::await_change());
    };
    let mirror_name = mirror_name(name);
    let key = ObjectKey::namespaced(ns.clone(), mirror_name.clone());
    let api = ctx.client.namespaced_api::<ConfigMap>(ns);
    let wrap = |source| MirrorError::Write {
        key: key.to_string(),
        source,
    };
    match ctx.configmaps.get(&key) {
        None => {
            let mirror = ConfigMap {
                metadata: ObjectMeta {
                    name: Some(mirror_name.clone()),
                    namespace: Some(ns.clone()),
                    labels: Some([(MIRROR_OF_LABEL.to_string(), name.clone())].into()),
                    owner_references: source.controller_owner_ref(&()).map(|r| vec![r]),
                    ..Default::default()
                },
                data: source.data.clone(),
                binary_data: source.binary_data.clone(),
                ..Default::default()
            };
            match api.create(&PostParams::default(), &mirror).await {
                Ok(_) => {}
                // The cache had not seen it yet; the watch event will bring us back.
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(e) => return Err(wrap(e)),
            }
        }
        Some(current) if !owned_by(&current, &source) => {
            // Someone else's ConfigMap has the mirror's name: leave it alone.
            tracing::warn!(mirror = %key, "not adopting a ConfigMap this source does not own");
        }
        Some(current)
            if current.data != source.data || current.binary_data != source.binary_data =>
        {
            let mut fixed = (*current).clone();
            fixed.data = source.data.clone();
            fixed.binary_data = source.binary_data.clone();
            // Replacing with the cached resourceVersion: a stale cache gets a 409 and a retry.
            api.replace(&mirror_name, &PostParams::default(), &fixed)
                .await
                .map_err(wrap)?;
        }
        Some(_) => {}
    }
    Ok(Action::await_change())
}

fn owned_by(mirror: &ConfigMap, source: &ConfigMap) -> bool {
    setpoint_runtime::owner::is_controlled_by(&mirror.metadata, &source.metadata)
}
