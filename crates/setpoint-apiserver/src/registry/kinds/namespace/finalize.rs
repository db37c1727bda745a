//! `namespaces/finalize`: replaces a namespace's `spec.finalizers` (the namespace controller
//! removes `kubernetes` here once the namespace's content is gone). A terminating namespace
//! whose finalizers are all done is removed, as kube-apiserver's namespace storage does.

use serde_json::{json, Value};
use setpoint_core::ApiError;

use crate::registry::meta::{self, meta_str};
use crate::registry::store::{RegistryStore, Scope, Updated};

/// Sets the `spec.finalizers` of the namespace `name` to `finalizers` (`null`: none).
pub(crate) async fn finalize(
    namespaces: &RegistryStore,
    name: &str,
    finalizers: &Value,
    dry_run: bool,
) -> Result<Updated, ApiError> {
    let updated = namespaces
        .update(None, name, Scope::Full, dry_run, &|current| {
            let mut next = current.clone();
            next["spec"]["finalizers"] = if finalizers.is_null() {
                json!([])
            } else {
                finalizers.clone()
            };
            meta::metadata(&mut next).remove("resourceVersion");
            Ok(next)
        })
        .await?;
    // The update removes a namespace it releases; one that was already released (nothing
    // changed) is removed here.
    if let Updated::Stored(o) = &updated {
        let done = !o["metadata"]["deletionTimestamp"].is_null()
            && o["spec"]["finalizers"].as_array().is_none_or(Vec::is_empty)
            && meta::finalizers(o).is_empty();
        if done && !dry_run {
            let rv = meta_str(o, "resourceVersion").and_then(|r| r.parse().ok());
            namespaces.remove(None, name, rv).await?;
        }
    }
    Ok(updated)
}
