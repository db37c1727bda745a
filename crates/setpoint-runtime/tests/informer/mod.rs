//! Shared informers against a real in-process API server: one watch per shared informer,
//! handlers (late, slow), relists after falling behind (tombstones), watch renewal without
//! relisting, loud list errors, indexes and selectors, metadata-only and dynamic informers.

use crate::fixtures;
use crate::gated;

mod caching;
mod relist;
mod sharing;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use fixtures::namespace;
use gated::Gate;
use k8s_openapi::api::core::v1::{ConfigMap, Container, Pod, PodSpec};
use kube::api::{ApiResource, DeleteParams, DynamicObject, ListParams, ObjectMeta, PostParams};
use kube::{Api, ResourceExt};
use parking_lot::Mutex;
use setpoint_runtime::{
    Deleted, EventHandler, IndexFn, InformerFactory, InformerOptions, ObjectKey, SharedInformer,
    WatchBackoff,
};
use setpoint_testenv::TestEnv;
use tokio::sync::mpsc;

/// A config map with a 100-byte annotation besides its label and data.
async fn create(api: &Api<ConfigMap>, name: &str, labels: &[(&str, &str)]) -> ConfigMap {
    let annotations = BTreeMap::from([("big".to_string(), "x".repeat(100))]);
    fixtures::create_configmap(api, name, labels, Some(annotations)).await
}

/// Reports each call as a line on a channel: `add ns/a initial`, `update ns/a`,
/// `delete ns/a unknown`.
struct Recorder(mpsc::UnboundedSender<String>);

fn recorder() -> (Recorder, mpsc::UnboundedReceiver<String>) {
    let (tx, rx) = mpsc::unbounded_channel();
    (Recorder(tx), rx)
}

impl<K: kube::Resource + Send + Sync + 'static> EventHandler<K> for Recorder {
    fn on_add(&self, object: &Arc<K>, in_initial_list: bool) {
        let initial = if in_initial_list { " initial" } else { "" };
        let _ = self
            .0
            .send(format!("add {}{initial}", ObjectKey::of(object.as_ref())));
    }

    fn on_update(&self, _old: &Arc<K>, new: &Arc<K>) {
        let _ = self
            .0
            .send(format!("update {}", ObjectKey::of(new.as_ref())));
    }

    fn on_delete(&self, deleted: &Deleted<K>) {
        let how = if deleted.is_final_state_unknown() {
            "unknown"
        } else {
            "final"
        };
        let _ = self.0.send(format!(
            "delete {} {how}",
            ObjectKey::of(deleted.object().as_ref())
        ));
    }
}

async fn take(rx: &mut mpsc::UnboundedReceiver<String>, n: usize) -> Vec<String> {
    let mut out = Vec::new();
    while out.len() < n {
        let line = tokio::time::timeout(Duration::from_secs(30), rx.recv())
            .await
            .unwrap_or_else(|_| panic!("timed out after {out:?}"))
            .expect("the handler is alive");
        out.push(line);
    }
    out
}

async fn synced<K>(informer: &SharedInformer<K>)
where
    K: kube::Resource
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    tokio::time::timeout(Duration::from_secs(30), informer.wait_until_synced())
        .await
        .expect("synced within 30 s");
}

/// Waits (up to 30 s) until `condition` holds.
async fn until(what: &str, mut condition: impl FnMut() -> bool) {
    let wait = async {
        while !condition() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(30), wait)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting until {what}"));
}

fn keys<K: kube::Resource>(objects: &[Arc<K>]) -> Vec<String> {
    objects
        .iter()
        .map(|o| ObjectKey::of(o.as_ref()).to_string())
        .collect()
}
