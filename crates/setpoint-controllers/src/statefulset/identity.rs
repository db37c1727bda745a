//! A StatefulSet pod's identity: its ordinal (from its name, `SET-ORDINAL`), the pod made for
//! an ordinal from a template (name, identity labels, hostname and subdomain, one claim volume
//! per `volumeClaimTemplate`), and the claims that ordinal owns (`TEMPLATE-SET-ORDINAL`).

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimVolumeSource, Pod, PodTemplateSpec, Volume,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use setpoint_runtime::owner;

use crate::history::CONTROLLER_REVISION_HASH;

/// The label naming the pod (so a Service can select one member).
pub(crate) const POD_NAME_LABEL: &str = "statefulset.kubernetes.io/pod-name";

/// The label holding the pod's ordinal.
pub(crate) const POD_INDEX_LABEL: &str = "apps.kubernetes.io/pod-index";

/// `spec.ordinals.start` (0 when unset).
pub(super) fn start_ordinal(set: &StatefulSet) -> i64 {
    set.spec
        .as_ref()
        .and_then(|s| s.ordinals.as_ref())
        .and_then(|o| o.start)
        .map_or(0, i64::from)
}

/// `spec.replicas` (1 when unset; negative counts as 0).
pub(super) fn replicas(set: &StatefulSet) -> usize {
    let replicas = set.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    usize::try_from(replicas).unwrap_or(0)
}

/// The ordinal of a pod of `set` named `name`: `None` unless the name is `SET-N` for a
/// non-negative decimal `N`.
pub(super) fn ordinal_of(set_name: &str, name: &str) -> Option<i64> {
    let digits = name.strip_prefix(set_name)?.strip_prefix('-')?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The name of `set`'s pod with `ordinal`.
pub(super) fn pod_name(set: &StatefulSet, ordinal: i64) -> String {
    format!(
        "{}-{ordinal}",
        set.metadata.name.as_deref().unwrap_or_default()
    )
}

/// The revision a pod was made from (its `controller-revision-hash` label).
pub(super) fn revision_of(pod: &Pod) -> Option<&str> {
    pod.metadata
        .labels
        .as_ref()?
        .get(CONTROLLER_REVISION_HASH)
        .map(String::as_str)
}

/// The claim of `set`'s pod `pod_name` made from the claim template named `template`.
pub(super) fn claim_name(template: &str, pod_name: &str) -> String {
    format!("{template}-{pod_name}")
}

/// The claims `set`'s pod with `ordinal` should have (without owner references).
pub(super) fn claims_for(set: &StatefulSet, ordinal: i64) -> Vec<PersistentVolumeClaim> {
    let pod = pod_name(set, ordinal);
    let selector_labels = set
        .spec
        .as_ref()
        .and_then(|s| s.selector.match_labels.clone())
        .unwrap_or_default();
    set.spec
        .iter()
        .flat_map(|s| s.volume_claim_templates.iter().flatten())
        .map(|template| {
            let template_name = template.metadata.name.as_deref().unwrap_or_default();
            let mut labels = template.metadata.labels.clone().unwrap_or_default();
            labels.extend(selector_labels.clone());
            PersistentVolumeClaim {
                metadata: ObjectMeta {
                    name: Some(claim_name(template_name, &pod)),
                    namespace: set.metadata.namespace.clone(),
                    labels: Some(labels),
                    annotations: template.metadata.annotations.clone(),
                    ..Default::default()
                },
                spec: template.spec.clone(),
                status: None,
            }
        })
        .collect()
}

/// The pod for `ordinal` of `set`, made from `template` (the set's, or an older revision's)
/// and labelled with revision `revision`.
pub(super) fn new_pod(
    set: &StatefulSet,
    template: &PodTemplateSpec,
    revision: &str,
    ordinal: i64,
) -> Pod {
    let name = pod_name(set, ordinal);
    let template_meta = template.metadata.clone().unwrap_or_default();
    let mut labels: BTreeMap<String, String> = template_meta.labels.unwrap_or_default();
    labels.insert(POD_NAME_LABEL.to_owned(), name.clone());
    labels.insert(POD_INDEX_LABEL.to_owned(), ordinal.to_string());
    labels.insert(CONTROLLER_REVISION_HASH.to_owned(), revision.to_owned());
    let mut spec = template.spec.clone().unwrap_or_default();
    spec.hostname = Some(name.clone());
    let service = set.spec.as_ref().and_then(|s| s.service_name.clone());
    if service.as_deref().is_some_and(|s| !s.is_empty()) {
        spec.subdomain = service;
    }
    let claims: Vec<(String, String)> = set
        .spec
        .iter()
        .flat_map(|s| s.volume_claim_templates.iter().flatten())
        .filter_map(|t| t.metadata.name.clone())
        .map(|t| {
            let claim = claim_name(&t, &name);
            (t, claim)
        })
        .collect();
    if !claims.is_empty() {
        let mut volumes: Vec<Volume> = claims
            .iter()
            .map(|(volume, claim)| Volume {
                name: volume.clone(),
                persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                    claim_name: claim.clone(),
                    read_only: None,
                }),
                ..Default::default()
            })
            .collect();
        volumes.extend(
            spec.volumes
                .take()
                .unwrap_or_default()
                .into_iter()
                .filter(|v| !claims.iter().any(|(name, _)| *name == v.name)),
        );
        spec.volumes = Some(volumes);
    }
    Pod {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: set.metadata.namespace.clone(),
            labels: Some(labels),
            annotations: template_meta.annotations,
            finalizers: template_meta.finalizers,
            owner_references: Some(vec![owner::controller_ref_to(set)]),
            ..Default::default()
        },
        spec: Some(spec),
        status: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::StatefulSetSpec;
    use k8s_openapi::api::core::v1::PodSpec;

    fn set() -> StatefulSet {
        StatefulSet {
            metadata: ObjectMeta {
                name: Some("web".into()),
                namespace: Some("ns".into()),
                uid: Some("u1".into()),
                ..Default::default()
            },
            spec: Some(StatefulSetSpec {
                service_name: Some("nginx".into()),
                volume_claim_templates: Some(vec![PersistentVolumeClaim {
                    metadata: ObjectMeta {
                        name: Some("www".into()),
                        ..Default::default()
                    },
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            status: None,
        }
    }

    #[test]
    fn ordinals_should_parse_only_set_members() {
        assert_eq!(ordinal_of("web", "web-0"), Some(0));
        assert_eq!(ordinal_of("web", "web-12"), Some(12));
        assert_eq!(ordinal_of("web", "web-"), None);
        assert_eq!(ordinal_of("web", "web-x1"), None);
        assert_eq!(ordinal_of("web", "webx-1"), None);
        assert_eq!(ordinal_of("web", "web-a-1"), None);
    }

    #[test]
    fn new_pod_should_carry_identity_storage_and_revision() {
        let template = PodTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some([("app".to_owned(), "web".to_owned())].into()),
                ..Default::default()
            }),
            spec: Some(PodSpec::default()),
        };
        let pod = new_pod(&set(), &template, "web-abc", 2);
        let labels = pod.metadata.labels.clone().unwrap_or_default();
        assert_eq!(pod.metadata.name.as_deref(), Some("web-2"));
        assert_eq!(labels[POD_NAME_LABEL], "web-2");
        assert_eq!(labels[POD_INDEX_LABEL], "2");
        assert_eq!(labels[CONTROLLER_REVISION_HASH], "web-abc");
        assert_eq!(labels["app"], "web");
        let spec = pod.spec.expect("spec");
        assert_eq!(spec.hostname.as_deref(), Some("web-2"));
        assert_eq!(spec.subdomain.as_deref(), Some("nginx"));
        let volumes = spec.volumes.expect("volumes");
        assert_eq!(
            volumes[0]
                .persistent_volume_claim
                .as_ref()
                .map(|c| c.claim_name.as_str()),
            Some("www-web-2")
        );
        let claims = claims_for(&set(), 2);
        assert_eq!(claims[0].metadata.name.as_deref(), Some("www-web-2"));
    }
}
