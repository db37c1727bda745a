//! The API server driven by the `kube` crate, a second real client beside `kubectl`, configured
//! from the server's admin kubeconfig: typed create/get/list with label selectors and paging,
//! the three patch types and their errors, optimistic concurrency, watch from a
//! resourceVersion, `kube::runtime::watcher` (list then watch, and streaming lists) converging
//! on changing objects, metadata-only reads, server-side apply refused with 415 for now,
//! delete's two kinds of answer, and the `status` and `scale` subresources. Each test's server
//! runs the API alone, without the built-in loops, which would write to the same objects.

use crate::common;

mod requests;
mod subresources;
mod watches;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::Server;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use kube::api::{
    Api, DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams, WatchEvent,
    WatchParams,
};
use kube::core::Status;
use kube::runtime::{reflector, watcher};
use serde_json::{json, Value};

/// How long a watch or watcher may take to show what the test waits for.
const EVENT_TIMEOUT: Duration = Duration::from_secs(20);

/// The API error of a call that should have failed with one.
#[track_caller]
fn api_error<T: std::fmt::Debug>(result: Result<T, kube::Error>) -> Box<Status> {
    match result {
        Err(kube::Error::Api(status)) => status,
        Err(e) => panic!("expected an API error, got {e:?}"),
        Ok(v) => panic!("expected an API error, got success: {v:?}"),
    }
}

fn assert_success(status: &Status) {
    assert!(status.is_success(), "{status:?}");
}

fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn configmap(name: &str, labels: &[(&str, &str)], pairs: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: (!labels.is_empty()).then(|| data(labels)),
            ..ObjectMeta::default()
        },
        data: Some(data(pairs)),
        ..ConfigMap::default()
    }
}

/// A two-replica Deployment with a main container (one env var) and a sidecar.
fn deployment(name: &str) -> Deployment {
    serde_json::from_value(json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [
                    {"name": "c", "image": "nginx:1.25", "env": [{"name": "A", "value": "1"}]},
                    {"name": "sidecar", "image": "busybox:1.36"}
                ]}
            }
        }
    }))
    .expect("a deployment")
}

/// A deployment's spec as JSON, for terse assertions.
fn spec(d: &Deployment) -> Value {
    serde_json::to_value(&d.spec).expect("spec")
}
