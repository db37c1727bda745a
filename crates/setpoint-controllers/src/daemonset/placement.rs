//! Where a DaemonSet's pods belong (kube-controller-manager's `NodeShouldRunDaemonPod`): the
//! pod made for a node — the template with the revision labels, the automatic DaemonSet
//! tolerations, and a required node affinity replaced by one `matchFields metadata.name` term
//! naming the node, so the default scheduler binds it there — and whether a node should run
//! one (node selector, required affinity, `NoSchedule`/`NoExecute` taints tolerated) or may
//! keep one it runs (affinity still matches, no untolerated `NoExecute` taint).

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{
    Affinity, Node, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, Pod,
    Toleration,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use setpoint_runtime::owner;

use crate::history::CONTROLLER_REVISION_HASH;
use crate::scheduler::{matches_node_selection, tolerates};

/// The label holding the DaemonSet generation a pod was made at (deprecated, still set).
pub(super) const POD_TEMPLATE_GENERATION: &str = "pod-template-generation";

/// Taints every DaemonSet pod tolerates: `(key, effect)`, operator `Exists`.
const AUTOMATIC_TOLERATIONS: &[(&str, &str)] = &[
    ("node.kubernetes.io/not-ready", "NoExecute"),
    ("node.kubernetes.io/unreachable", "NoExecute"),
    ("node.kubernetes.io/disk-pressure", "NoSchedule"),
    ("node.kubernetes.io/memory-pressure", "NoSchedule"),
    ("node.kubernetes.io/pid-pressure", "NoSchedule"),
    ("node.kubernetes.io/unschedulable", "NoSchedule"),
];

/// Tolerated too by pods on the host network.
const HOST_NETWORK_TOLERATION: (&str, &str) =
    ("node.kubernetes.io/network-unavailable", "NoSchedule");

/// Whether a node should run the DaemonSet's pod, and whether it may keep one it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Placement {
    /// A pod should be created here if there is none.
    pub(super) should_run: bool,
    /// A pod here may stay (a node gaining a `NoSchedule` taint keeps its pod).
    pub(super) may_stay: bool,
}

/// The DaemonSet's pod template as a pod (no node yet): labels with `hash` and the
/// generation, the automatic tolerations added.
pub(super) fn template_pod(ds: &DaemonSet, hash: &str) -> Pod {
    let template = ds
        .spec
        .as_ref()
        .map(|s| s.template.clone())
        .unwrap_or_default();
    let meta = template.metadata.unwrap_or_default();
    let mut labels = meta.labels.unwrap_or_default();
    labels.insert(CONTROLLER_REVISION_HASH.to_owned(), hash.to_owned());
    if let Some(generation) = ds.metadata.generation {
        labels.insert(POD_TEMPLATE_GENERATION.to_owned(), generation.to_string());
    }
    let mut spec = template.spec.unwrap_or_default();
    let mut tolerations = spec.tolerations.take().unwrap_or_default();
    let host_network = spec.host_network == Some(true);
    for (key, effect) in AUTOMATIC_TOLERATIONS
        .iter()
        .chain(host_network.then_some(&HOST_NETWORK_TOLERATION))
    {
        tolerations
            .retain(|t| !(t.key.as_deref() == Some(key) && t.effect.as_deref() == Some(effect)));
        tolerations.push(Toleration {
            key: Some((*key).to_owned()),
            operator: Some("Exists".to_owned()),
            effect: Some((*effect).to_owned()),
            ..Default::default()
        });
    }
    spec.tolerations = Some(tolerations);
    let name = ds.metadata.name.as_deref().unwrap_or_default();
    Pod {
        metadata: ObjectMeta {
            generate_name: Some(format!("{name}-")),
            namespace: ds.metadata.namespace.clone(),
            labels: Some(labels),
            annotations: meta.annotations,
            finalizers: meta.finalizers,
            owner_references: Some(vec![owner::controller_ref_to(ds)]),
            ..Default::default()
        },
        spec: Some(spec),
        status: None,
    }
}

/// `template` (from [`template_pod`]) bound for `node`: its required node affinity is one
/// term matching the node's name.
pub(super) fn pod_for_node(template: &Pod, node: &str) -> Pod {
    let mut pod = template.clone();
    let spec = pod.spec.get_or_insert_with(Default::default);
    let affinity = spec.affinity.get_or_insert_with(Affinity::default);
    let node_affinity = affinity
        .node_affinity
        .get_or_insert_with(NodeAffinity::default);
    node_affinity.required_during_scheduling_ignored_during_execution = Some(NodeSelector {
        node_selector_terms: vec![NodeSelectorTerm {
            match_expressions: None,
            match_fields: Some(vec![NodeSelectorRequirement {
                key: "metadata.name".to_owned(),
                operator: "In".to_owned(),
                values: Some(vec![node.to_owned()]),
            }]),
        }],
    });
    pod
}

/// The node a DaemonSet pod is on or meant for: its `nodeName`, else the node its
/// `matchFields metadata.name` term names.
pub(super) fn node_of(pod: &Pod) -> Option<&str> {
    let spec = pod.spec.as_ref()?;
    if let Some(node) = spec.node_name.as_deref().filter(|n| !n.is_empty()) {
        return Some(node);
    }
    let terms = &spec
        .affinity
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required_during_scheduling_ignored_during_execution
        .as_ref()?
        .node_selector_terms;
    terms
        .iter()
        .flat_map(|t| t.match_fields.iter().flatten())
        .find(|r| r.key == "metadata.name" && r.operator == "In")
        .and_then(|r| r.values.as_ref()?.first())
        .map(String::as_str)
}

/// Where `template` (from [`template_pod`]) may run with respect to `node`.
pub(super) fn placement(template: &Pod, node: &Node) -> Placement {
    if !matches_node_selection(template, node) {
        return Placement {
            should_run: false,
            may_stay: false,
        };
    }
    let tolerations = template
        .spec
        .as_ref()
        .and_then(|s| s.tolerations.as_deref())
        .unwrap_or_default();
    let taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_deref())
        .unwrap_or_default();
    let untolerated = |effect: &str| {
        taints
            .iter()
            .filter(|t| t.effect == effect)
            .any(|taint| !tolerations.iter().any(|t| tolerates(t, taint)))
    };
    let no_execute = untolerated("NoExecute");
    Placement {
        should_run: !no_execute && !untolerated("NoSchedule"),
        may_stay: !no_execute,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::DaemonSetSpec;
    use k8s_openapi::api::core::v1::{NodeSpec, PodSpec, PodTemplateSpec, Taint};

    fn ds(node_selector: Option<(&str, &str)>) -> DaemonSet {
        DaemonSet {
            metadata: ObjectMeta {
                name: Some("agent".into()),
                generation: Some(3),
                ..Default::default()
            },
            spec: Some(DaemonSetSpec {
                template: PodTemplateSpec {
                    metadata: None,
                    spec: Some(PodSpec {
                        node_selector: node_selector
                            .map(|(k, v)| [(k.to_owned(), v.to_owned())].into()),
                        ..Default::default()
                    }),
                },
                ..Default::default()
            }),
            status: None,
        }
    }

    fn node(labels: &[(&str, &str)], taints: &[(&str, &str)]) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some("n1".into()),
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                        .collect(),
                ),
                ..Default::default()
            },
            spec: Some(NodeSpec {
                taints: Some(
                    taints
                        .iter()
                        .map(|(k, e)| Taint {
                            key: (*k).to_owned(),
                            effect: (*e).to_owned(),
                            ..Default::default()
                        })
                        .collect(),
                ),
                ..Default::default()
            }),
            status: None,
        }
    }

    #[test]
    fn placement_should_follow_selectors_and_taints() {
        let t = template_pod(&ds(Some(("disk", "ssd"))), "h1");
        let yes = Placement {
            should_run: true,
            may_stay: true,
        };
        assert_eq!(placement(&t, &node(&[("disk", "ssd")], &[])), yes);
        assert_eq!(
            placement(&t, &node(&[("disk", "hdd")], &[])),
            Placement {
                should_run: false,
                may_stay: false
            }
        );
        // The automatic tolerations: cordoned and unreachable nodes keep their pods.
        let tolerated = [
            ("node.kubernetes.io/unschedulable", "NoSchedule"),
            ("node.kubernetes.io/unreachable", "NoExecute"),
        ];
        assert_eq!(placement(&t, &node(&[("disk", "ssd")], &tolerated)), yes);
        assert_eq!(
            placement(
                &t,
                &node(&[("disk", "ssd")], &[("dedicated", "NoSchedule")])
            ),
            Placement {
                should_run: false,
                may_stay: true
            }
        );
        assert_eq!(
            placement(&t, &node(&[("disk", "ssd")], &[("dedicated", "NoExecute")])),
            Placement {
                should_run: false,
                may_stay: false
            }
        );
    }

    #[test]
    fn pod_for_node_should_name_the_node_in_a_match_fields_term() {
        let t = template_pod(&ds(None), "h1");
        let labels = t.metadata.labels.clone().unwrap_or_default();
        assert_eq!(labels[CONTROLLER_REVISION_HASH], "h1");
        assert_eq!(labels[POD_TEMPLATE_GENERATION], "3");
        let pod = pod_for_node(&t, "n7");
        assert_eq!(node_of(&pod), Some("n7"));
        let n7 = Node {
            metadata: ObjectMeta {
                name: Some("n7".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let mut other = n7.clone();
        other.metadata.name = Some("n8".into());
        assert!(matches_node_selection(&pod, &n7));
        assert!(!matches_node_selection(&pod, &other));
    }
}
