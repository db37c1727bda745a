//! Test support: a handler that reports every call on a channel, and object builders.

use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::ObjectMeta;
use tokio::sync::mpsc;

use super::handler::{Deleted, EventHandler};
use crate::ObjectKey;

/// Reports each call as a line: `add ns/a initial`, `update ns/a 1->2 same`, `delete ns/a unknown`.
pub(crate) struct Recorder(pub(crate) mpsc::UnboundedSender<String>);

impl Recorder {
    pub(crate) fn new() -> (Recorder, mpsc::UnboundedReceiver<String>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Recorder(tx), rx)
    }
}

fn rv(o: &ConfigMap) -> &str {
    o.metadata.resource_version.as_deref().unwrap_or("")
}

impl EventHandler<ConfigMap> for Recorder {
    fn on_add(&self, object: &Arc<ConfigMap>, in_initial_list: bool) {
        let initial = if in_initial_list { " initial" } else { "" };
        let _ = self
            .0
            .send(format!("add {}{initial}", ObjectKey::of(object.as_ref())));
    }

    fn on_update(&self, old: &Arc<ConfigMap>, new: &Arc<ConfigMap>) {
        let same = if Arc::ptr_eq(old, new) { " same" } else { "" };
        let _ = self.0.send(format!(
            "update {} {}->{}{same}",
            ObjectKey::of(new.as_ref()),
            rv(old),
            rv(new)
        ));
    }

    fn on_delete(&self, deleted: &Deleted<ConfigMap>) {
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

/// A config map `ns/name` at resource version `rv`.
pub(crate) fn cm(name: &str, rv: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            namespace: Some("ns".into()),
            name: Some(name.into()),
            resource_version: Some(rv.into()),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// The next `n` lines from `rx`; panics if they take over a minute (of paused time, in
/// paused tests).
pub(crate) async fn take(rx: &mut mpsc::UnboundedReceiver<String>, n: usize) -> Vec<String> {
    let mut out = Vec::new();
    while out.len() < n {
        let line = tokio::time::timeout(std::time::Duration::from_secs(60), rx.recv())
            .await
            .unwrap_or_else(|_| panic!("no notification within a minute after {out:?}"));
        out.push(line.expect("the recorder is alive"));
    }
    out
}
