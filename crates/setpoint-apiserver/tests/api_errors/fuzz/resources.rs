//! The resources the hostile requests go to: a valid object of each and its subresources.

use serde_json::{json, Value};

/// What a resource looks like to the generator: its collection path, a valid object and
/// the subresources it serves.
pub(super) struct Resource {
    pub(super) collection: &'static str,
    pub(super) object: fn(&str) -> Value,
    pub(super) subresources: &'static [&'static str],
}

pub(super) const RESOURCES: &[Resource] = &[
    Resource {
        collection: "/api/v1/namespaces/fz/configmaps",
        object: |n| json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":n},"data":{"k":"v"}}),
        subresources: &[],
    },
    Resource {
        collection: "/api/v1/namespaces/fz/secrets",
        object: |n| json!({"apiVersion":"v1","kind":"Secret","metadata":{"name":n},"stringData":{"k":"v"},"type":"Opaque"}),
        subresources: &[],
    },
    Resource {
        collection: "/api/v1/namespaces/fz/pods",
        object: |n| {
            json!({"apiVersion":"v1","kind":"Pod","metadata":{"name":n,"labels":{"app":"a"}},
                "spec":{"terminationGracePeriodSeconds":30,"activeDeadlineSeconds":100,
                    "containers":[{"name":"c","image":"busybox","command":["sleep","1"],
                        "ports":[{"containerPort":80}],
                        "resources":{"requests":{"cpu":"100m","memory":"1Mi"}},
                        "readinessProbe":{"exec":{"command":["true"]},"periodSeconds":1,"timeoutSeconds":1}}]}})
        },
        subresources: &[
            "status",
            "log",
            "binding",
            "eviction",
            "ephemeralcontainers",
            "exec",
            "nosuch",
        ],
    },
    Resource {
        collection: "/apis/apps/v1/namespaces/fz/deployments",
        object: |n| {
            json!({"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":n},
                "spec":{"replicas":1,"revisionHistoryLimit":3,"progressDeadlineSeconds":60,"minReadySeconds":0,
                    "selector":{"matchLabels":{"app":n}},
                    "strategy":{"type":"RollingUpdate","rollingUpdate":{"maxSurge":"25%","maxUnavailable":1}},
                    "template":{"metadata":{"labels":{"app":n}},
                        "spec":{"containers":[{"name":"c","image":"busybox","command":["sleep","1"]}]}}}})
        },
        subresources: &["status", "scale"],
    },
    Resource {
        collection: "/apis/apps/v1/namespaces/fz/replicasets",
        object: |n| {
            json!({"apiVersion":"apps/v1","kind":"ReplicaSet","metadata":{"name":n},
                "spec":{"replicas":2,"selector":{"matchLabels":{"app":n}},
                    "template":{"metadata":{"labels":{"app":n}},
                        "spec":{"containers":[{"name":"c","image":"busybox"}]}}}})
        },
        subresources: &["status", "scale"],
    },
    Resource {
        collection: "/api/v1/namespaces/fz/services",
        object: |n| json!({"apiVersion":"v1","kind":"Service","metadata":{"name":n},"spec":{"ports":[{"port":80,"targetPort":8080}],"selector":{"app":"a"}}}),
        subresources: &["status"],
    },
    Resource {
        collection: "/api/v1/namespaces",
        object: |n| json!({"apiVersion":"v1","kind":"Namespace","metadata":{"name":n}}),
        subresources: &["status", "finalize"],
    },
    Resource {
        collection: "/api/v1/nodes",
        object: |n| json!({"apiVersion":"v1","kind":"Node","metadata":{"name":n},"spec":{"unschedulable":false}}),
        subresources: &["status"],
    },
    Resource {
        collection: "/apis/coordination.k8s.io/v1/namespaces/fz/leases",
        object: |n| json!({"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":n},"spec":{"holderIdentity":"x","leaseDurationSeconds":15}}),
        subresources: &[],
    },
    Resource {
        collection: "/apis/autoscaling/v2/namespaces/fz/horizontalpodautoscalers",
        object: |n| {
            json!({"apiVersion":"autoscaling/v2","kind":"HorizontalPodAutoscaler","metadata":{"name":n},
                "spec":{"minReplicas":1,"maxReplicas":5,
                    "scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"d"},
                    "metrics":[{"type":"Resource","resource":{"name":"cpu","target":{"type":"Utilization","averageUtilization":50}}}]}})
        },
        subresources: &["status"],
    },
    Resource {
        collection: "/api/v1/namespaces/fz/events",
        object: |n| json!({"apiVersion":"v1","kind":"Event","metadata":{"name":n},"involvedObject":{"kind":"Pod","name":"p"},"reason":"R","message":"m","count":1}),
        subresources: &[],
    },
    Resource {
        collection: "/apis/fuzz.setpoint.dev/v1/namespaces/fz/widgets",
        object: |n| json!({"apiVersion":"fuzz.setpoint.dev/v1","kind":"Widget","metadata":{"name":n},"spec":{"size":3,"l":[1,2,3],"s":"x"}}),
        subresources: &["status", "scale"],
    },
];

/// The CRD behind the `widgets` resource: a schema with bounds, defaults and a CEL rule.
pub(super) fn widget_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.fuzz.setpoint.dev"},
        "spec": {"group": "fuzz.setpoint.dev", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.size", "statusReplicasPath": ".status.size"}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object",
                        "x-kubernetes-validations": [{"rule": "self.l.all(x, x >= 0)", "message": "no negatives"}],
                        "properties": {
                            "size": {"type": "integer", "minimum": 0, "maximum": 100, "default": 1},
                            "l": {"type": "array", "maxItems": 10, "items": {"type": "integer"}},
                            "s": {"type": "string", "maxLength": 20}}},
                    "status": {"type": "object", "properties": {"size": {"type": "integer"}}}}}}}]}
    })
}
