//! networking.k8s.io/v1 IPAddress (cluster-scoped): one IP address taken from a ServiceCIDR,
//! named by the address itself in canonical form (`10.96.0.10`, `2001:db8::1`, never
//! `2001:DB8::1` or `010.96.0.10`), with `spec.parentRef` naming what holds it (a resource and
//! a name, optionally a group and a namespace), which never changes. The API keeps one for
//! every Service's cluster IP (`api/ip_addresses.rs`); others are stored and validated only.
//! Its row is `NAME PARENTREF`.

use std::net::IpAddr;
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use k8s_openapi::api::networking::v1::IPAddress;
use serde_json::{json, Value};
use setpoint_core::Cause;

use crate::registry::identity::{Identity, ALL_VERBS};
use crate::registry::strategy::{round_trip, schema_of, validate_name, NameRule, Strategy, TypedSchema};
use crate::registry::table::{name_cell, Column};
use crate::registry::validation::{immutable, object_meta};
use crate::registry::ResourceDef;

pub(crate) fn resources() -> Vec<ResourceDef> {
    vec![Identity {
        group: "networking.k8s.io",
        version: "v1",
        kind: "IPAddress",
        plural: "ipaddresses",
        singular: "ipaddress",
        short_names: &["ip"],
        categories: &[],
        namespaced: false,
        verbs: ALL_VERBS,
    }
    .build(Arc::new(IpAddresses), |_| vec![])]
}

/// What is wrong with `name` as an IPAddress's name, if anything.
fn name_problem(name: &str) -> Option<String> {
    match name.parse::<IpAddr>() {
        Err(_) => Some("must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)".into()),
        Ok(ip) if ip.to_string() != name => Some(format!("must be in canonical form ({:?})", ip.to_string())),
        Ok(_) => None,
    }
}

#[derive(Debug)]
struct IpAddresses;

#[async_trait]
impl Strategy for IpAddresses {
    fn normalize(&self, object: &Value) -> Result<Value, String> {
        // The typed struct requires a parent reference with a name and a resource; a missing
        // one is a validation error (422), as kube-apiserver reports it, not a decoding one.
        let mut filled = object.clone();
        let had_parent = filled["spec"]["parentRef"].is_object();
        if filled.is_object() && (filled["spec"].is_object() || filled["spec"].is_null()) {
            let parent = &mut filled["spec"]["parentRef"];
            if parent.is_null() {
                *parent = json!({});
            }
            if let Some(parent) = parent.as_object_mut() {
                for key in ["name", "resource"] {
                    parent.entry(key).or_insert_with(|| json!(""));
                }
            }
        }
        let mut typed = round_trip::<IPAddress>(&filled)?;
        if !had_parent {
            if let Some(spec) = typed["spec"].as_object_mut() {
                spec.remove("parentRef");
            }
        }
        Ok(typed)
    }

    fn typed_schema(&self) -> Option<TypedSchema> {
        schema_of::<IPAddress>()
    }

    fn name_rule(&self) -> NameRule {
        NameRule::Any
    }

    async fn validate(&self, object: &Value, old: Option<&Value>) -> Vec<Cause> {
        let mut causes = object_meta(object);
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        if !name.is_empty() {
            if let Some(problem) = name_problem(name) {
                causes.push(Cause::invalid("metadata.name", &json!(name), &problem));
            }
        }
        let parent = &object["spec"]["parentRef"];
        if !parent.is_object() {
            causes.push(Cause::required("spec.parentRef"));
            return causes;
        }
        let group = parent["group"].as_str().unwrap_or_default();
        if !group.is_empty() {
            for problem in validate_name(group, NameRule::Subdomain) {
                causes.push(Cause::invalid("spec.parentRef.group", &json!(group), &problem));
            }
        }
        for (key, required) in [("resource", true), ("name", true), ("namespace", false)] {
            let value = parent[key].as_str().unwrap_or_default();
            let field = format!("spec.parentRef.{key}");
            if value.is_empty() {
                if required {
                    causes.push(Cause::required(field));
                }
                continue;
            }
            for problem in validate_name(value, NameRule::Any) {
                causes.push(Cause::invalid(field.clone(), &json!(value), &problem));
            }
        }
        immutable(object, old, "/spec/parentRef", &mut causes);
        causes
    }

    fn columns(&self) -> Vec<Column> {
        vec![Column::name(), Column::new("ParentRef", 0)]
    }

    fn cells(&self, o: &Value, _now: DateTime<Utc>) -> Vec<Value> {
        let parent = &o["spec"]["parentRef"];
        let text = if parent.is_object() {
            let mut text = parent["resource"].as_str().unwrap_or_default().to_owned();
            if let Some(group) = parent["group"].as_str().filter(|g| !g.is_empty()) {
                text = format!("{text}.{group}");
            }
            let mut text = text.to_lowercase();
            if let Some(ns) = parent["namespace"].as_str().filter(|n| !n.is_empty()) {
                text = format!("{text}/{ns}");
            }
            format!("{text}/{}", parent["name"].as_str().unwrap_or_default())
        } else {
            "<none>".to_owned()
        };
        vec![name_cell(o), json!(text)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(o: &Value, old: Option<&Value>) -> Vec<String> {
        futures::executor::block_on(IpAddresses.validate(o, old))
            .into_iter()
            .map(|c| c.field)
            .collect()
    }

    fn address(name: &str, parent: Value) -> Value {
        IpAddresses
            .normalize(&json!({"metadata": {"name": name}, "spec": {"parentRef": parent}}))
            .unwrap()
    }

    #[test]
    fn names_should_be_canonical_addresses() {
        let web = json!({"resource": "services", "namespace": "default", "name": "web"});
        assert!(fields(&address("10.96.0.10", web.clone()), None).is_empty());
        assert!(fields(&address("2001:db8::1", web.clone()), None).is_empty());
        for bad in ["2001:DB8::1", "2001:db8:0::1", "010.96.0.10", "10.96.0", "web"] {
            assert_eq!(fields(&address(bad, web.clone()), None), ["metadata.name"], "{bad}");
        }
    }

    #[test]
    fn the_parent_should_be_required_complete_and_fixed() {
        let missing = IpAddresses
            .normalize(&json!({"metadata": {"name": "10.0.0.1"}, "spec": {}}))
            .unwrap();
        assert_eq!(fields(&missing, None), ["spec.parentRef"]);
        assert_eq!(
            fields(&address("10.0.0.1", json!({"group": "Bad_Group"})), None),
            ["spec.parentRef.group", "spec.parentRef.resource", "spec.parentRef.name"]
        );
        let old = address("10.0.0.1", json!({"resource": "services", "name": "a"}));
        let new = address("10.0.0.1", json!({"resource": "services", "name": "b"}));
        assert_eq!(fields(&new, Some(&old)), ["spec.parentRef"]);
        assert_eq!(IpAddresses.cells(&old, Utc::now())[1], "services/a");
        let gateway = address("10.0.0.2", json!({"group": "gateway.networking.k8s.io", "resource": "gateways", "namespace": "ns", "name": "gw"}));
        assert_eq!(IpAddresses.cells(&gateway, Utc::now())[1], "gateways.gateway.networking.k8s.io/ns/gw");
    }
}
