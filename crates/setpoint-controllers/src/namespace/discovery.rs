//! Which resources a namespace can hold: every namespaced resource the server serves that can
//! be deleted and found (verbs `delete`, and `deletecollection` or `list`), found anew on each
//! pass through discovery, so custom resources are included as soon as the server serves them.
//!
//! One version per resource: for each group, the preferred version's resources, then those
//! only other versions serve (as client-go's `ServerPreferredNamespacedResources`).
//! Aggregated discovery is asked first (two requests); if the server refuses it, the legacy
//! documents are read group version by group version, and the ones that fail are reported
//! while the rest are still used — a pass never finalizes with any failure, so nothing is
//! skipped for good.

use std::collections::BTreeSet;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResourceList;
use kube::discovery::{verbs, ApiCapabilities, ApiResource, Discovery, Scope};

/// How the objects of one resource are removed and checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Removal {
    /// `deletecollection`, then `list` what remains.
    CollectionThenList,
    /// `deletecollection`; the resource cannot be listed, so what remains is not known.
    CollectionOnly,
    /// `list`, `delete` each object, then `list` what remains.
    EachThenList,
}

/// A namespaced resource whose objects this loop deletes.
#[derive(Debug, Clone)]
pub(super) struct Deletable {
    /// The resource, at its chosen version.
    pub(super) resource: ApiResource,
    /// How its objects go.
    pub(super) removal: Removal,
}

impl Deletable {
    /// `resource.group`, as condition messages name it (core resources end in a bare `.`).
    pub(super) fn group_resource(&self) -> String {
        format!("{}.{}", self.resource.plural, self.resource.group)
    }
}

/// What discovery found.
#[derive(Debug, Default)]
pub(super) struct Discovered {
    /// The resources to clear, at most one entry per group and resource name.
    pub(super) resources: Vec<Deletable>,
    /// What could not be discovered, one rendered error each; empty when discovery was complete.
    pub(super) failures: Vec<String>,
}

/// A resource as one group version lists it.
struct Candidate {
    resource: ApiResource,
    namespaced: bool,
    verbs: Vec<String>,
}

/// One group's resources, version by version, preferred version first.
type GroupVersions = Vec<Vec<Candidate>>;

/// Discovers the deletable namespaced resources. Cancel-safe (it only reads).
pub(super) async fn discover(client: &kube::Client) -> Discovered {
    match Discovery::new(client.clone()).run_aggregated().await {
        Ok(discovery) => {
            let groups = discovery
                .groups()
                .map(|g| {
                    let preferred = g.preferred_version_or_latest().to_owned();
                    std::iter::once(preferred.clone())
                        .chain(g.versions().filter(|v| *v != preferred).map(str::to_owned))
                        .map(|v| {
                            g.versioned_resources(&v)
                                .into_iter()
                                .map(|(resource, caps)| from_capabilities(resource, &caps))
                                .collect()
                        })
                        .collect()
                })
                .collect();
            Discovered {
                resources: select(groups),
                failures: Vec::new(),
            }
        }
        Err(e) => {
            tracing::debug!(error = %e, "aggregated discovery failed; reading the legacy documents");
            legacy(client).await
        }
    }
}

fn from_capabilities(resource: ApiResource, caps: &ApiCapabilities) -> Candidate {
    Candidate {
        resource,
        namespaced: caps.scope == Scope::Namespaced,
        verbs: caps.operations.clone(),
    }
}

/// Legacy discovery: `/api`, `/apis`, then one request per group version.
async fn legacy(client: &kube::Client) -> Discovered {
    let mut failures = Vec::new();
    // (group, versions in preference order)
    let mut plan: Vec<(String, Vec<String>)> = Vec::new();
    match client.list_core_api_versions().await {
        Ok(core) => plan.push((String::new(), core.versions)),
        Err(e) => failures.push(format!("/api: {e}")),
    }
    match client.list_api_groups().await {
        Ok(list) => {
            for g in list.groups {
                let preferred = g.preferred_version.map(|p| p.version);
                let mut versions: Vec<String> = preferred.iter().cloned().collect();
                versions.extend(
                    g.versions
                        .into_iter()
                        .map(|v| v.version)
                        .filter(|v| Some(v) != preferred.as_ref()),
                );
                plan.push((g.name, versions));
            }
        }
        Err(e) => failures.push(format!("/apis: {e}")),
    }
    let mut groups = Vec::new();
    for (group, versions) in plan {
        let mut found: GroupVersions = Vec::new();
        for version in versions {
            let group_version = if group.is_empty() {
                version.clone()
            } else {
                format!("{group}/{version}")
            };
            let listed = if group.is_empty() {
                client.list_core_api_resources(&group_version).await
            } else {
                client.list_api_group_resources(&group_version).await
            };
            match listed {
                Ok(list) => found.push(candidates(&group, &version, list)),
                Err(e) => failures.push(format!("{group_version}: {e}")),
            }
        }
        groups.push(found);
    }
    Discovered {
        resources: select(groups),
        failures,
    }
}

fn candidates(group: &str, version: &str, list: APIResourceList) -> Vec<Candidate> {
    list.resources
        .into_iter()
        .filter(|r| !r.name.contains('/'))
        .map(|r| {
            let group = r.group.unwrap_or_else(|| group.to_owned());
            let version = r.version.unwrap_or_else(|| version.to_owned());
            Candidate {
                resource: ApiResource {
                    api_version: if group.is_empty() {
                        version.clone()
                    } else {
                        format!("{group}/{version}")
                    },
                    group,
                    version,
                    kind: r.kind,
                    plural: r.name,
                },
                namespaced: r.namespaced,
                verbs: r.verbs,
            }
        })
        .collect()
}

/// One entry per group and resource name, from the first version (in preference order) that
/// serves it, keeping only namespaced resources that can be deleted and found.
fn select(groups: Vec<GroupVersions>) -> Vec<Deletable> {
    let mut out = Vec::new();
    for versions in groups {
        let mut seen = BTreeSet::new();
        for candidate in versions.into_iter().flatten() {
            if !candidate.namespaced || seen.contains(&candidate.resource.plural) {
                continue;
            }
            let has = |verb: &str| candidate.verbs.iter().any(|v| v == verb);
            if !has(verbs::DELETE) {
                continue;
            }
            let removal = match (has(verbs::DELETE_COLLECTION), has(verbs::LIST)) {
                (true, true) => Removal::CollectionThenList,
                (true, false) => Removal::CollectionOnly,
                (false, true) => Removal::EachThenList,
                (false, false) => continue,
            };
            seen.insert(candidate.resource.plural.clone());
            out.push(Deletable {
                resource: candidate.resource,
                removal,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn candidate(
        group: &str,
        version: &str,
        plural: &str,
        namespaced: bool,
        verbs: &[&str],
    ) -> Candidate {
        Candidate {
            resource: ApiResource {
                group: group.to_owned(),
                version: version.to_owned(),
                api_version: format!("{group}/{version}"),
                kind: plural.to_owned(),
                plural: plural.to_owned(),
            },
            namespaced,
            verbs: verbs.iter().map(|v| (*v).to_owned()).collect(),
        }
    }

    #[test]
    fn select_should_keep_deletable_namespaced_resources_once_at_the_preferred_version() {
        let all = ["list", "delete", "deletecollection"];
        let groups = vec![
            vec![
                vec![
                    candidate("g", "v1", "widgets", true, &all),
                    candidate("g", "v1", "clusterthings", false, &all),
                    candidate("g", "v1", "readonly", true, &["get", "list"]),
                    candidate("g", "v1", "listless", true, &["delete", "deletecollection"]),
                ],
                vec![
                    candidate("g", "v1beta1", "widgets", true, &all),
                    candidate("g", "v1beta1", "gadgets", true, &["list", "delete"]),
                ],
            ],
            vec![vec![candidate("h", "v1", "widgets", true, &all)]],
        ];
        let selected: Vec<(String, String, Removal)> = select(groups)
            .into_iter()
            .map(|d| (d.group_resource(), d.resource.version, d.removal))
            .collect();
        assert_eq!(
            selected,
            vec![
                (
                    "widgets.g".to_owned(),
                    "v1".to_owned(),
                    Removal::CollectionThenList
                ),
                (
                    "listless.g".to_owned(),
                    "v1".to_owned(),
                    Removal::CollectionOnly
                ),
                (
                    "gadgets.g".to_owned(),
                    "v1beta1".to_owned(),
                    Removal::EachThenList
                ),
                (
                    "widgets.h".to_owned(),
                    "v1".to_owned(),
                    Removal::CollectionThenList
                ),
            ]
        );
    }

    #[test]
    fn core_resources_should_be_named_with_a_bare_dot() {
        let d = Deletable {
            resource: candidate("", "v1", "pods", true, &[]).resource,
            removal: Removal::CollectionThenList,
        };
        assert_eq!(d.group_resource(), "pods.");
    }
}
