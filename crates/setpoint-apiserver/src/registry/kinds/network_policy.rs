//! networking.k8s.io/v1 NetworkPolicy: which traffic may reach and leave the pods a selector
//! picks. Defaults as kube-apiserver's: ports `TCP`, policy types `Ingress` (and `Egress` when
//! egress rules are given), an empty pod selector (every pod). Ports are in range, an end port
//! follows its port, IP blocks are CIDRs whose exceptions lie inside them. Nothing enforces
//! the policies in Setpoint; its row is `NAME POD-SELECTOR AGE`.

use std::net::IpAddr;
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use serde_json::{json, Value};
use setpoint_core::{Cause, LabelSelector};

use crate::registry::defaults::{default, object_at};
use crate::registry::identity::{Identity, ALL_VERBS};
use crate::registry::strategy::{round_trip, schema_of, Strategy, TypedSchema};
use crate::registry::table::{age_cell, name_cell, selector_string, Column};
use crate::registry::validation::object_meta;
use crate::registry::ResourceDef;

pub(crate) fn resources() -> Vec<ResourceDef> {
    vec![Identity {
        group: "networking.k8s.io",
        version: "v1",
        kind: "NetworkPolicy",
        plural: "networkpolicies",
        singular: "networkpolicy",
        short_names: &["netpol"],
        categories: &[],
        namespaced: true,
        verbs: ALL_VERBS,
    }
    .build(Arc::new(NetworkPolicies), |_| vec![])]
}

const POLICY_TYPES: &[&str] = &["Ingress", "Egress"];

#[derive(Debug)]
struct NetworkPolicies;

fn items(v: &Value) -> &[Value] {
    v.as_array().map(Vec::as_slice).unwrap_or_default()
}

/// A CIDR's address and prefix length, if it is one.
fn cidr(text: &str) -> Option<(IpAddr, u8)> {
    let (ip, bits) = text.split_once('/')?;
    let ip: IpAddr = ip.parse().ok()?;
    let bits: u8 = bits.parse().ok()?;
    let max = if ip.is_ipv4() { 32 } else { 128 };
    (bits <= max).then_some((ip, bits))
}

/// The first `bits` bits of an address, as a number.
fn prefix(ip: IpAddr, bits: u8) -> u128 {
    let (value, width) = match ip {
        IpAddr::V4(v4) => (u128::from(u32::from(v4)), 32),
        IpAddr::V6(v6) => (u128::from(v6), 128),
    };
    let shift = u32::from(width - bits.min(width));
    value.checked_shr(shift).unwrap_or(0)
}

#[async_trait]
impl Strategy for NetworkPolicies {
    fn normalize(&self, object: &Value) -> Result<Value, String> {
        round_trip::<NetworkPolicy>(object)
    }

    fn typed_schema(&self) -> Option<TypedSchema> {
        schema_of::<NetworkPolicy>()
    }

    fn has_generation(&self) -> bool {
        true
    }

    fn apply_defaults(&self, object: &mut Value) {
        let Some(spec) = object_at(object, &["spec"]) else {
            return;
        };
        default(spec, "podSelector", json!({}));
        let egress = spec.get("egress").is_some_and(|e| e.as_array().is_some_and(|a| !a.is_empty()));
        let types = if egress { json!(["Ingress", "Egress"]) } else { json!(["Ingress"]) };
        if spec.get("policyTypes").and_then(Value::as_array).is_none_or(|t| t.is_empty()) {
            spec.insert("policyTypes".into(), types);
        }
        for direction in ["ingress", "egress"] {
            let rules = spec.get_mut(direction).and_then(Value::as_array_mut);
            for rule in rules.into_iter().flatten() {
                let ports = rule.get_mut("ports").and_then(Value::as_array_mut);
                for port in ports.into_iter().flatten().filter_map(Value::as_object_mut) {
                    default(port, "protocol", json!("TCP"));
                }
            }
        }
    }

    async fn validate(&self, object: &Value, _old: Option<&Value>) -> Vec<Cause> {
        let mut causes = object_meta(object);
        let spec = &object["spec"];
        if let Err(e) = LabelSelector::from_structured(&spec["podSelector"]) {
            causes.push(Cause::invalid("spec.podSelector", &spec["podSelector"], &e.to_string()));
        }
        let types = items(&spec["policyTypes"]);
        for (i, t) in types.iter().enumerate() {
            if !t.as_str().is_some_and(|t| POLICY_TYPES.contains(&t)) {
                causes.push(Cause::not_supported(format!("spec.policyTypes[{i}]"), t, POLICY_TYPES));
            }
        }
        if types.len() > 2 {
            causes.push(Cause::invalid("spec.policyTypes", &spec["policyTypes"], "may not specify more than two policyTypes"));
        }
        for (direction, peers) in [("ingress", "from"), ("egress", "to")] {
            for (i, rule) in items(&spec[direction]).iter().enumerate() {
                let at = format!("spec.{direction}[{i}]");
                for (j, port) in items(&rule["ports"]).iter().enumerate() {
                    let p = format!("{at}.ports[{j}]");
                    let number = port["port"].as_i64();
                    if number.is_some_and(|n| !(1..=65535).contains(&n)) {
                        causes.push(Cause::invalid(format!("{p}.port"), &port["port"], "must be between 1 and 65535, inclusive"));
                    }
                    if let Some(end) = port["endPort"].as_i64() {
                        if number.is_none() {
                            causes.push(Cause::required(format!("{p}.port")));
                        } else if number.is_some_and(|n| end < n) {
                            causes.push(Cause::invalid(format!("{p}.endPort"), &port["endPort"], "must be greater than or equal to `port`"));
                        }
                    }
                }
                for (j, peer) in items(&rule[peers]).iter().enumerate() {
                    ip_block(&peer["ipBlock"], &format!("{at}.{peers}[{j}].ipBlock"), &mut causes);
                }
            }
        }
        causes
    }

    fn columns(&self) -> Vec<Column> {
        vec![Column::name(), Column::new("Pod-Selector", 0), Column::new("Age", 0)]
    }

    fn cells(&self, o: &Value, now: DateTime<Utc>) -> Vec<Value> {
        vec![
            name_cell(o),
            json!(selector_string(&o["spec"]["podSelector"])),
            age_cell(o, now),
        ]
    }
}

/// The problems of an IP block: a CIDR, and exceptions inside it.
fn ip_block(block: &Value, at: &str, causes: &mut Vec<Cause>) {
    if block.is_null() {
        return;
    }
    let Some((ip, bits)) = block["cidr"].as_str().and_then(cidr) else {
        causes.push(Cause::invalid(format!("{at}.cidr"), &block["cidr"], "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"));
        return;
    };
    for (k, except) in items(&block["except"]).iter().enumerate() {
        let inside = except.as_str().and_then(cidr).is_some_and(|(e, ebits)| {
            e.is_ipv4() == ip.is_ipv4() && ebits > bits && prefix(e, bits) == prefix(ip, bits)
        });
        if !inside {
            causes.push(Cause::invalid(format!("{at}.except[{k}]"), except, "must be a strict subset of `cidr`"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_types_should_default_from_the_rules() {
        let mut o = json!({"spec": {"egress": [{"ports": [{"port": 53}]}]}});
        NetworkPolicies.apply_defaults(&mut o);
        assert_eq!(o["spec"]["policyTypes"], json!(["Ingress", "Egress"]));
        assert_eq!(o["spec"]["podSelector"], json!({}));
        assert_eq!(o["spec"]["egress"][0]["ports"][0]["protocol"], "TCP");
        let mut o = json!({"spec": {}});
        NetworkPolicies.apply_defaults(&mut o);
        assert_eq!(o["spec"]["policyTypes"], json!(["Ingress"]));
    }

    #[test]
    fn ports_and_ip_blocks_should_be_checked() {
        let o = json!({"metadata": {"name": "n", "namespace": "d"}, "spec": {"podSelector": {},
            "ingress": [{"ports": [{"port": 80, "endPort": 70}], "from": [{"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16", "11.0.0.0/16"]}}]}],
            "egress": [{"to": [{"ipBlock": {"cidr": "nope"}}]}]}});
        let fields: Vec<String> = futures::executor::block_on(NetworkPolicies.validate(&o, None))
            .into_iter()
            .map(|c| c.field)
            .collect();
        assert_eq!(
            fields,
            ["spec.ingress[0].ports[0].endPort", "spec.ingress[0].from[0].ipBlock.except[1]", "spec.egress[0].to[0].ipBlock.cidr"]
        );
    }
}
