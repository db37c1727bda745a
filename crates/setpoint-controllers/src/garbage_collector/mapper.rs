//! What the server serves, from discovery: the resources the collector watches (every one that
//! can be listed, watched and deleted, but events) and the kind → resource mapping an owner
//! reference (`apiVersion`, `kind`) is resolved with.

use std::collections::HashMap;

use kube::api::ApiResource;
use kube::discovery::{verbs, Discovery, Scope};

/// A resource the server serves.
#[derive(Debug, Clone)]
pub(super) struct Served {
    pub(super) resource: ApiResource,
    pub(super) scope: Scope,
}

impl Served {
    /// Whether objects of this kind live in a namespace.
    pub(super) fn namespaced(&self) -> bool {
        matches!(self.scope, Scope::Namespaced)
    }
}

/// Kinds to resources, as of the last discovery.
#[derive(Debug, Default, Clone)]
pub(super) struct Mapper {
    /// By `(group, kind)`: the resource at each served version, the preferred one first.
    by_kind: HashMap<(String, String), Vec<Served>>,
    /// What the collector watches: one version per resource, the preferred one.
    watched: Vec<Served>,
}

/// Resources the collector leaves alone, as kube-controller-manager's does (`events` are
/// never owners nor owned in a way worth collecting, and there are many).
const IGNORED: &[(&str, &str)] = &[("", "events"), ("events.k8s.io", "events")];

impl Mapper {
    /// Runs discovery.
    pub(super) async fn discover(client: &kube::Client) -> Result<Mapper, kube::Error> {
        let discovery = Discovery::new(client.clone()).run().await?;
        let mut mapper = Mapper::default();
        for group in discovery.groups() {
            let preferred = group.preferred_version_or_latest().to_owned();
            let mut versions: Vec<&str> = group.versions().collect();
            versions.sort_by_key(|v| *v != preferred);
            for version in versions {
                for (resource, caps) in group.versioned_resources(version) {
                    let served = Served {
                        scope: caps.scope.clone(),
                        resource,
                    };
                    let key = (served.resource.group.clone(), served.resource.kind.clone());
                    let watchable = [verbs::LIST, verbs::WATCH, verbs::DELETE]
                        .iter()
                        .all(|v| caps.supports_operation(v));
                    let ignored = IGNORED
                        .iter()
                        .any(|(g, p)| *g == served.resource.group && *p == served.resource.plural);
                    if version == preferred && watchable && !ignored {
                        mapper.watched.push(served.clone());
                    }
                    mapper.by_kind.entry(key).or_default().push(served);
                }
            }
        }
        Ok(mapper)
    }

    /// The resources to watch.
    pub(super) fn watched(&self) -> &[Served] {
        &self.watched
    }

    /// The resource for `kind` at `api_version` if served, else at the preferred version of
    /// its group (any version reads the same object).
    pub(super) fn resolve(&self, api_version: &str, kind: &str) -> Option<&Served> {
        let (group, version) = match api_version.split_once('/') {
            Some((g, v)) => (g, v),
            None => ("", api_version),
        };
        let all = self.by_kind.get(&(group.to_owned(), kind.to_owned()))?;
        all.iter()
            .find(|s| s.resource.version == version)
            .or_else(|| all.first())
    }
}
