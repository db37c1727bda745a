//! One APIService as the proxy, discovery and the availability checks need it: its
//! group-version, priorities, Service, TLS settings and whether it is `Available`. Compiled
//! from the APIServices' watch cache when one changes ([`Compiled`]): every request under
//! `/apis/{group}/{version}` asks, so an unchanged cache costs one pointer comparison under a
//! read lock.

use std::sync::{Arc, OnceLock};

use serde_json::Value;

use super::transport::{self, Identity};
use crate::watchcache::{Objects, WatchCache};

/// Every APIService, compiled, in name order.
pub(crate) type All = Arc<Vec<Arc<Registered>>>;

/// Every APIService, compiled from the objects of the watch cache last seen.
#[derive(Default)]
pub(crate) struct Compiled {
    last: parking_lot::RwLock<Option<(Objects, All)>>,
}

impl Compiled {
    /// The APIServices in `cache` now, in name order; compiled again only if its objects
    /// changed (the cache's map is persistent: unchanged, it is the same map).
    pub(crate) fn get(&self, cache: &WatchCache) -> All {
        let (objects, _) = cache.snapshot();
        if let Some((seen, compiled)) = &*self.last.read() {
            if seen.ptr_eq(&objects) {
                return compiled.clone();
            }
        }
        let compiled: All = Arc::new(
            objects
                .values()
                .filter_map(|o| serde_json::from_slice::<Value>(&o.json.bytes()).ok())
                .flat_map(|v| compile(&v))
                .collect(),
        );
        *self.last.write() = Some((objects, compiled.clone()));
        compiled
    }
}

/// Where an APIService's server is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ServiceRef {
    pub(crate) namespace: String,
    pub(crate) name: String,
    /// `spec.service.port`, 443 when unset.
    pub(crate) port: u16,
}

impl ServiceRef {
    /// The name its certificate must be for: `NAME.NAMESPACE.svc`.
    pub(crate) fn server_name(&self) -> String {
        format!("{}.{}.svc", self.name, self.namespace)
    }
}

/// One APIService.
#[derive(Debug)]
pub(crate) struct Registered {
    pub(crate) name: String,
    pub(crate) group: String,
    pub(crate) version: String,
    pub(crate) group_priority: i64,
    pub(crate) version_priority: i64,
    /// `None`: served locally.
    pub(crate) service: Option<ServiceRef>,
    ca_bundle: Option<Vec<u8>>,
    /// Why `caBundle` is unusable (not base64).
    ca_bundle_error: Option<String>,
    insecure: bool,
    /// A fingerprint of its TLS settings (`caBundle`, `insecureSkipTLSVerify`): connections
    /// are shared by APIServices with the same.
    pub(crate) tls_key: u64,
    /// Its `Available` condition is `True`.
    pub(crate) available: bool,
    /// The `Available` condition as stored (`null` if none).
    pub(crate) condition: Value,
    tls: OnceLock<Result<Arc<rustls::ClientConfig>, String>>,
}

impl Registered {
    /// The TLS settings its server is called with, built on first use: its `caBundle` (the
    /// system's roots without one) or no verification with `insecureSkipTLSVerify`, presenting
    /// `identity`.
    pub(crate) fn tls(
        &self,
        identity: Option<&Identity>,
    ) -> Result<Arc<rustls::ClientConfig>, String> {
        self.tls
            .get_or_init(|| {
                if let Some(e) = &self.ca_bundle_error {
                    return Err(e.clone());
                }
                transport::tls_config(self.ca_bundle.as_deref(), self.insecure, identity)
            })
            .clone()
    }
}

/// The APIService `object`, compiled (none if it lacks a group-version).
pub(crate) fn compile(object: &Value) -> Vec<Arc<Registered>> {
    let spec = &object["spec"];
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    let (Some(name), Some(version)) = (
        object["metadata"]["name"].as_str(),
        spec["version"].as_str(),
    ) else {
        return Vec::new();
    };
    let service = spec["service"].as_object().map(|s| ServiceRef {
        namespace: text(&s["namespace"]),
        name: text(&s["name"]),
        port: s
            .get("port")
            .and_then(Value::as_u64)
            .and_then(|p| u16::try_from(p).ok())
            .unwrap_or(443),
    });
    let (ca_bundle, ca_bundle_error) = match spec["caBundle"].as_str().filter(|b| !b.is_empty()) {
        None => (None, None),
        Some(b) => {
            use base64::Engine as _;
            match base64::engine::general_purpose::STANDARD.decode(b) {
                Ok(pem) => (Some(pem), None),
                Err(e) => (None, Some(format!("the caBundle is not base64: {e}"))),
            }
        }
    };
    let condition = super::available_condition(object)
        .cloned()
        .unwrap_or(Value::Null);
    let insecure = spec["insecureSkipTLSVerify"] == Value::Bool(true);
    let tls_key = {
        use std::hash::{Hash as _, Hasher as _};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        spec["caBundle"].as_str().hash(&mut hasher);
        insecure.hash(&mut hasher);
        hasher.finish()
    };
    vec![Arc::new(Registered {
        name: name.to_owned(),
        group: text(&spec["group"]),
        version: version.to_owned(),
        group_priority: spec["groupPriorityMinimum"].as_i64().unwrap_or_default(),
        version_priority: spec["versionPriority"].as_i64().unwrap_or_default(),
        service,
        ca_bundle,
        ca_bundle_error,
        insecure,
        tls_key,
        available: condition["status"] == "True",
        condition,
        tls: OnceLock::new(),
    })]
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn an_apiservice_should_compile_with_its_defaults() {
        let o = json!({"metadata": {"name": "v1.wardle.example.com"}, "spec": {
            "group": "wardle.example.com", "version": "v1", "groupPriorityMinimum": 1000,
            "versionPriority": 15, "service": {"namespace": "w", "name": "api"}},
            "status": {"conditions": [{"type": "Available", "status": "True"}]}});
        let r = compile(&o).pop().unwrap();
        assert_eq!(r.service.as_ref().unwrap().port, 443);
        assert_eq!(r.service.as_ref().unwrap().server_name(), "api.w.svc");
        assert!(r.available);
        assert_eq!(r.group_priority, 1000);
        let local =
            json!({"metadata": {"name": "v1.apps"}, "spec": {"group": "apps", "version": "v1"}});
        let r = compile(&local).pop().unwrap();
        assert!(r.service.is_none() && !r.available);
        let bad = json!({"metadata": {"name": "v1.x"}, "spec": {"group": "x", "version": "v1",
            "caBundle": "%%%", "service": {"namespace": "a", "name": "b"}}});
        let r = compile(&bad).pop().unwrap();
        assert!(r.tls(None).unwrap_err().contains("not base64"));
    }
}
