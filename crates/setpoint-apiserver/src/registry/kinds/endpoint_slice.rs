//! discovery.k8s.io/v1 EndpointSlice: a slice of a service's endpoints of one address type.
//! Ports default to `TCP` with an empty name; the address type is required, known and never
//! changes; each endpoint has one to a hundred addresses. Its row lists up to three ports and
//! three addresses.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use serde_json::{json, Value};
use setpoint_core::Cause;

use crate::registry::defaults::default;
use crate::registry::identity::{Identity, ALL_VERBS};
use crate::registry::strategy::{round_trip, schema_of, Strategy, TypedSchema};
use crate::registry::table::{age_cell, name_cell, Column};
use crate::registry::validation::{immutable, object_meta, one_of, required};
use crate::registry::ResourceDef;

pub(crate) fn resources() -> Vec<ResourceDef> {
    vec![Identity {
        group: "discovery.k8s.io",
        version: "v1",
        kind: "EndpointSlice",
        plural: "endpointslices",
        singular: "endpointslice",
        short_names: &[],
        categories: &[],
        namespaced: true,
        verbs: ALL_VERBS,
    }
    .build(Arc::new(EndpointSlices), |_| vec![])]
}

const ADDRESS_TYPES: &[&str] = &["IPv4", "IPv6", "FQDN"];

/// The most addresses one endpoint may have.
const MAX_ADDRESSES: usize = 100;

/// How many ports and addresses the row shows.
const SHOWN: usize = 3;

#[derive(Debug)]
struct EndpointSlices;

fn items(v: &Value) -> &[Value] {
    v.as_array().map(Vec::as_slice).unwrap_or_default()
}

#[async_trait]
impl Strategy for EndpointSlices {
    fn normalize(&self, object: &Value) -> Result<Value, String> {
        round_trip::<EndpointSlice>(object)
    }

    fn typed_schema(&self) -> Option<TypedSchema> {
        schema_of::<EndpointSlice>()
    }

    fn apply_defaults(&self, object: &mut Value) {
        let ports = object.get_mut("ports").and_then(Value::as_array_mut);
        for port in ports.into_iter().flatten().filter_map(Value::as_object_mut) {
            default(port, "name", json!(""));
            default(port, "protocol", json!("TCP"));
        }
    }

    async fn validate(&self, object: &Value, old: Option<&Value>) -> Vec<Cause> {
        let mut causes = object_meta(object);
        required(object, "/addressType", &mut causes);
        one_of(object, "/addressType", ADDRESS_TYPES, &mut causes);
        immutable(object, old, "/addressType", &mut causes);
        let kind = object["addressType"].as_str().unwrap_or_default();
        for (i, endpoint) in items(&object["endpoints"]).iter().enumerate() {
            let at = format!("endpoints[{i}].addresses");
            let addresses = items(&endpoint["addresses"]);
            if addresses.is_empty() {
                causes.push(Cause::required(at.clone()));
            } else if addresses.len() > MAX_ADDRESSES {
                causes.push(Cause::new(
                    "FieldValueTooMany",
                    at.clone(),
                    format!("{at}: Too many: {}: must have at most {MAX_ADDRESSES} items", addresses.len()),
                ));
            }
            for (j, address) in addresses.iter().enumerate() {
                let text = address.as_str().unwrap_or_default();
                let ok = match kind {
                    "IPv4" => text.parse::<Ipv4Addr>().is_ok(),
                    "IPv6" => text.parse::<Ipv6Addr>().is_ok(),
                    _ => !text.is_empty(),
                };
                if !ok {
                    causes.push(Cause::invalid(
                        format!("{at}[{j}]"),
                        address,
                        &format!("must be a valid {kind} address"),
                    ));
                }
            }
        }
        for (i, port) in items(&object["ports"]).iter().enumerate() {
            let p = &port["port"];
            if !p.is_null() && !p.as_i64().is_some_and(|n| (1..=65535).contains(&n)) {
                causes.push(Cause::invalid(
                    format!("ports[{i}].port"),
                    p,
                    "must be between 1 and 65535, inclusive",
                ));
            }
            one_of(port, "/protocol", &["SCTP", "TCP", "UDP"], &mut causes);
        }
        causes
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::new("AddressType", 0),
            Column::new("Ports", 0),
            Column::new("Endpoints", 0),
            Column::new("Age", 0),
        ]
    }

    fn cells(&self, o: &Value, now: DateTime<Utc>) -> Vec<Value> {
        let ports = items(&o["ports"]).iter().map(|p| match (&p["port"], &p["name"]) {
            (Value::Number(n), _) => n.to_string(),
            (_, Value::String(name)) if !name.is_empty() => name.clone(),
            _ => "*".to_owned(),
        });
        let addresses = items(&o["endpoints"])
            .iter()
            .flat_map(|e| items(&e["addresses"]))
            .map(|a| a.as_str().unwrap_or_default().to_owned());
        vec![
            name_cell(o),
            json!(o["addressType"].as_str().unwrap_or_default()),
            json!(first_few(ports)),
            json!(first_few(addresses)),
            age_cell(o, now),
        ]
    }
}

/// Up to three items, then ` + N more...`; `<unset>` when there are none.
fn first_few(all: impl Iterator<Item = String>) -> String {
    let all: Vec<String> = all.collect();
    if all.is_empty() {
        return "<unset>".into();
    }
    let mut text = all[..all.len().min(SHOWN)].join(",");
    if all.len() > SHOWN {
        text.push_str(&format!(" + {} more...", all.len() - SHOWN));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(o: &Value, old: Option<&Value>) -> Vec<String> {
        futures::executor::block_on(EndpointSlices.validate(o, old))
            .into_iter()
            .map(|c| c.field)
            .collect()
    }

    #[test]
    fn addresses_should_match_the_address_type_which_never_changes() {
        let mut o = json!({"metadata": {"name": "s", "namespace": "d"}, "addressType": "IPv4",
            "endpoints": [{"addresses": ["10.0.0.1"]}, {"addresses": ["fe80::1"]}, {"addresses": []}],
            "ports": [{"port": 80}]});
        EndpointSlices.apply_defaults(&mut o);
        assert_eq!(o["ports"][0], json!({"port": 80, "name": "", "protocol": "TCP"}));
        assert_eq!(fields(&o, None), ["endpoints[1].addresses[0]", "endpoints[2].addresses"]);
        let old = json!({"metadata": {"name": "s", "namespace": "d"}, "addressType": "IPv6"});
        let new = json!({"metadata": {"name": "s", "namespace": "d"}, "addressType": "IPv4"});
        assert_eq!(fields(&new, Some(&old)), ["addressType"]);
        assert_eq!(fields(&json!({"metadata": {"name": "s"}}), None), ["addressType"]);
    }

    #[test]
    fn the_row_should_show_ports_and_addresses() {
        let o = json!({"metadata": {"name": "s"}, "addressType": "IPv4", "ports": [{"port": 80}, {"name": "x"}],
            "endpoints": [{"addresses": ["1.1.1.1", "1.1.1.2"]}, {"addresses": ["1.1.1.3", "1.1.1.4"]}]});
        let cells = EndpointSlices.cells(&o, Utc::now());
        assert_eq!(cells[2], "80,x");
        assert_eq!(cells[3], "1.1.1.1,1.1.1.2,1.1.1.3 + 1 more...");
    }
}
