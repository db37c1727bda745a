//! core/v1 Service: named by DNS-1035 labels; defaults (`ClusterIP`, TCP ports, target port
//! = port); a cluster IP allocated on create ([`cluster_ip`]) that never changes and that an
//! update leaving it out keeps; node ports for `NodePort` and `LoadBalancer` services
//! ([`node_port`]); the `kubectl get services` row.

mod cluster_ip;
mod node_port;

pub(crate) use cluster_ip::SERVICE_RANGE;

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Service;
use serde_json::{json, Value};
use setpoint_core::{ApiError, Cause, SelectableFields};

use crate::registry::defaults::{default, object_at};
use crate::registry::fields::{self, Field};
use crate::registry::identity::{status, Identity, ALL_VERBS};
use crate::registry::strategy::{round_trip, schema_of, NameRule, Peers, Strategy, TypedSchema};
use crate::registry::table::{age_cell, name_cell, Column};
use crate::registry::validation::object_meta;
use crate::registry::ResourceDef;

pub(crate) fn resources() -> Vec<ResourceDef> {
    vec![Identity {
        group: "",
        version: "v1",
        kind: "Service",
        plural: "services",
        singular: "service",
        short_names: &["svc"],
        categories: &["all"],
        namespaced: true,
        verbs: ALL_VERBS,
    }
    .build(Arc::new(Services), |g| vec![status(g)])]
}

const FIELDS: &[Field] = &[
    ("spec.clusterIP", "/spec/clusterIP", ""),
    ("spec.type", "/spec/type", ""),
];

#[derive(Debug)]
struct Services;

#[async_trait]
impl Strategy for Services {
    fn normalize(&self, object: &Value) -> Result<Value, String> {
        round_trip::<Service>(object)
    }

    fn typed_schema(&self) -> Option<TypedSchema> {
        schema_of::<Service>()
    }

    fn name_rule(&self) -> NameRule {
        NameRule::Dns1035Label
    }

    fn has_status(&self) -> bool {
        true
    }

    fn apply_defaults(&self, object: &mut Value) {
        if let Some(spec) = object_at(object, &["spec"]) {
            default(spec, "type", json!("ClusterIP"));
            default(spec, "sessionAffinity", json!("None"));
            if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
                for port in ports.iter_mut().filter_map(Value::as_object_mut) {
                    default(port, "protocol", json!("TCP"));
                    if let Some(p) = port.get("port").cloned() {
                        default(port, "targetPort", p);
                    }
                }
            }
        }
    }

    fn initialize(&self, object: &mut Value) {
        if let Some(map) = object.as_object_mut() {
            map.insert("status".into(), json!({}));
        }
    }

    fn prepare_update(&self, new: &mut Value, old: &Value) {
        keep_cluster_ip(new, old);
        self.apply_defaults(new);
    }

    async fn before_create(&self, peers: &dyn Peers, object: &mut Value) -> Result<(), ApiError> {
        cluster_ip::assign(peers, object).await?;
        node_port::assign(peers, object, None).await
    }

    async fn before_update(
        &self,
        peers: &dyn Peers,
        new: &mut Value,
        old: &Value,
    ) -> Result<(), ApiError> {
        node_port::assign(peers, new, Some(old)).await
    }

    async fn validate(&self, object: &Value, old: Option<&Value>) -> Vec<Cause> {
        let mut causes = object_meta(object);
        validate_spec(&object["spec"], &mut causes);
        load_balancer_class(&object["spec"], old.map(|o| &o["spec"]), &mut causes);
        if let Some(old) = old {
            let (new_ip, old_ip) = (&object["spec"]["clusterIP"], &old["spec"]["clusterIP"]);
            if !old_ip.is_null() && new_ip != old_ip {
                causes.push(Cause::invalid(
                    "spec.clusterIPs[0]",
                    new_ip,
                    "may not change once set",
                ));
            }
        }
        causes
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::new("Type", 0),
            Column::new("Cluster-IP", 0),
            Column::new("External-IP", 0),
            Column::new("Port(s)", 0),
            Column::new("Age", 0),
            Column::new("Selector", 1),
        ]
    }

    fn cells(&self, o: &Value, now: DateTime<Utc>) -> Vec<Value> {
        let spec = &o["spec"];
        let ports: Vec<String> = spec["ports"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .map(|p| {
                let proto = p["protocol"].as_str().unwrap_or("TCP");
                match p["nodePort"].as_i64() {
                    Some(np) => format!("{}:{np}/{proto}", p["port"]),
                    None => format!("{}/{proto}", p["port"]),
                }
            })
            .collect();
        let selector = spec["selector"]
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "<none>".into());
        vec![
            name_cell(o),
            json!(spec["type"].as_str().unwrap_or("ClusterIP")),
            json!(spec["clusterIP"]
                .as_str()
                .filter(|s| !s.is_empty())
                .unwrap_or("<none>")),
            json!("<none>"),
            json!(if ports.is_empty() {
                "<none>".to_owned()
            } else {
                ports.join(",")
            }),
            age_cell(o, now),
            json!(selector),
        ]
    }

    fn selectable(&self, namespaced: bool) -> SelectableFields {
        fields::selectable(FIELDS, namespaced)
    }

    fn field_set(&self, object: &Value) -> BTreeMap<String, String> {
        fields::field_set(FIELDS, object)
    }
}

/// A service update that leaves out the cluster IP keeps the allocated one, as kube-apiserver
/// does (a `kubectl replace` of the original manifest must not try to change it).
fn keep_cluster_ip(new: &mut Value, current: &Value) {
    if new["spec"]["clusterIP"]
        .as_str()
        .is_some_and(|ip| !ip.is_empty())
    {
        return;
    }
    let Some(spec) = new.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    spec.remove("clusterIP");
    for field in ["clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"] {
        if let Some(v) = current["spec"].get(field) {
            if spec.get(field).is_none_or(Value::is_null) {
                spec.insert(field.into(), v.clone());
            }
        }
    }
}

/// `spec.loadBalancerClass`, as kube-apiserver checks it: only on a `LoadBalancer` Service, and
/// fixed for as long as the Service stays one (a balancer controller chose it by its class).
fn load_balancer_class(spec: &Value, old: Option<&Value>, causes: &mut Vec<Cause>) {
    let is_lb = |spec: &Value| spec["type"] == "LoadBalancer";
    let class = &spec["loadBalancerClass"];
    if let Some(old) = old {
        if is_lb(old) && is_lb(spec) && old["loadBalancerClass"] != *class {
            causes.push(Cause::invalid(
                "spec.loadBalancerClass",
                class,
                "may not change once set",
            ));
        }
    }
    if class.is_null() {
        return;
    }
    if !is_lb(spec) {
        causes.push(Cause::forbidden(
            "spec.loadBalancerClass",
            "may only be used when `type` is 'LoadBalancer'",
        ));
    } else if !class.as_str().is_some_and(is_qualified_name) {
        causes.push(Cause::invalid(
            "spec.loadBalancerClass",
            class,
            "must be a qualified name: an optional DNS-subdomain prefix and '/', then at most 63 \
             alphanumeric characters, '-', '_' or '.', starting and ending with an alphanumeric character",
        ));
    }
}

/// A Kubernetes qualified name (`[prefix/]name`, as label keys are).
fn is_qualified_name(text: &str) -> bool {
    let (prefix, name) = match text.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, text),
    };
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|label| {
                !label.is_empty()
                    && label.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
                    && label.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
                    && label
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            })
    });
    name_ok && prefix_ok
}

fn validate_spec(spec: &Value, causes: &mut Vec<Cause>) {
    let kind = spec["type"].as_str().unwrap_or("ClusterIP");
    let ports = spec["ports"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    if ports.is_empty() && kind != "ExternalName" && spec["clusterIP"] != json!("None") {
        causes.push(Cause::required("spec.ports"));
    }
    for (i, p) in ports.iter().enumerate() {
        let port = p["port"].as_i64().unwrap_or(0);
        if !(1..=65535).contains(&port) {
            causes.push(Cause::invalid(
                format!("spec.ports[{i}].port"),
                &p["port"],
                "must be between 1 and 65535, inclusive",
            ));
        }
    }
    node_port::validate(spec, causes);
    let types = ["ClusterIP", "NodePort", "LoadBalancer", "ExternalName"];
    if !types.contains(&kind) {
        causes.push(Cause::not_supported("spec.type", &spec["type"], &types));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn causes(spec: Value, old: Option<Value>) -> Vec<String> {
        let mut causes = Vec::new();
        load_balancer_class(&spec, old.as_ref(), &mut causes);
        causes.into_iter().map(|c| c.message).collect()
    }

    #[test]
    fn the_load_balancer_class_should_be_checked_as_kube_does() {
        let lb = |class: Value| json!({"type": "LoadBalancer", "loadBalancerClass": class});
        assert!(causes(lb(json!("setpoint.dev/service-lb")), None).is_empty());
        assert!(causes(lb(Value::Null), None).is_empty());
        assert_eq!(
            causes(lb(json!("a/b")), Some(lb(json!("c/d")))),
            ["spec.loadBalancerClass: Invalid value: \"a/b\": may not change once set"]
        );
        // Set when the Service becomes a LoadBalancer; cleared when it stops being one.
        assert!(causes(lb(json!("a/b")), Some(json!({"type": "ClusterIP"}))).is_empty());
        assert!(causes(json!({"type": "ClusterIP"}), Some(lb(json!("a/b")))).is_empty());
        assert_eq!(
            causes(json!({"type": "ClusterIP", "loadBalancerClass": "a/b"}), None),
            ["spec.loadBalancerClass: Forbidden: may only be used when `type` is 'LoadBalancer'"]
        );
        assert_eq!(causes(lb(json!("Not Valid/x")), None).len(), 1);
        assert_eq!(causes(lb(json!("-x")), None).len(), 1);
    }
}
