//! Which resource serves a kind, and whether it is namespaced: discovery of one group version
//! at a time, remembered per (group, version, kind). A kind that is not served is asked again
//! next time (its CRD may be applied by the stage before).

use std::collections::HashMap;

use kube::api::ApiResource;
use kube::discovery::Scope;
use parking_lot::Mutex;

/// A served kind.
#[derive(Clone, Debug)]
pub(crate) struct Served {
    /// Its resource (plural, group, version).
    pub(crate) resource: ApiResource,
    /// Whether its objects live in namespaces.
    pub(crate) namespaced: bool,
}

/// Why a kind could not be resolved.
#[derive(Debug, thiserror::Error)]
#[error("no resource serves {kind} in {api_version}")]
pub(crate) struct NotServed {
    /// The apiVersion asked for.
    pub(crate) api_version: String,
    /// The kind asked for.
    pub(crate) kind: String,
    /// Discovery's error.
    #[source]
    pub(crate) source: kube::Error,
}

/// Discovery results, shared by every reconcile of the loop.
#[derive(Default)]
pub(crate) struct Discovery {
    served: Mutex<HashMap<(String, String, String), Served>>,
}

impl Discovery {
    /// The resource serving `kind` in `group`/`version`.
    pub(crate) async fn resolve(
        &self,
        client: &kube::Client,
        group: &str,
        version: &str,
        kind: &str,
    ) -> Result<Served, NotServed> {
        let key = (group.to_owned(), version.to_owned(), kind.to_owned());
        if let Some(served) = self.served.lock().get(&key) {
            return Ok(served.clone());
        }
        let gvk = kube::api::GroupVersionKind::gvk(group, version, kind);
        match kube::discovery::pinned_kind(client, &gvk).await {
            Ok((resource, capabilities)) => {
                let served = Served {
                    resource,
                    namespaced: capabilities.scope == Scope::Namespaced,
                };
                self.served.lock().insert(key, served.clone());
                Ok(served)
            }
            Err(source) => Err(NotServed {
                api_version: setpoint_core::api_version(group, version),
                kind: kind.to_owned(),
                source,
            }),
        }
    }

    /// Forgets every kind (after a CRD changed, say).
    pub(crate) fn forget(&self) {
        self.served.lock().clear();
    }
}
