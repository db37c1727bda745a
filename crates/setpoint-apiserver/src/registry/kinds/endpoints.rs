//! core/v1 Endpoints: the addresses and ports behind a service, in subsets. Ports default to
//! `TCP`; addresses must be IP addresses, ports in range, and a subset with more than one port
//! names each. Its row lists the first three `ip:port` pairs and how many more there are.

use std::net::IpAddr;
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Endpoints;
use serde_json::{json, Value};
use setpoint_core::Cause;

use crate::registry::defaults::default;
use crate::registry::identity::{Identity, ALL_VERBS};
use crate::registry::strategy::{round_trip, schema_of, Strategy, TypedSchema};
use crate::registry::table::{age_cell, name_cell, Column};
use crate::registry::validation::object_meta;
use crate::registry::ResourceDef;

pub(crate) fn resources() -> Vec<ResourceDef> {
    vec![Identity {
        group: "",
        version: "v1",
        kind: "Endpoints",
        plural: "endpoints",
        singular: "endpoints",
        short_names: &["ep"],
        categories: &[],
        namespaced: true,
        verbs: ALL_VERBS,
    }
    .build(Arc::new(EndpointsStrategy), |_| vec![])]
}

const PROTOCOLS: &[&str] = &["SCTP", "TCP", "UDP"];

/// How many `ip:port` pairs the row shows.
const SHOWN: usize = 3;

#[derive(Debug)]
struct EndpointsStrategy;

fn items(v: &Value) -> &[Value] {
    v.as_array().map(Vec::as_slice).unwrap_or_default()
}

#[async_trait]
impl Strategy for EndpointsStrategy {
    fn normalize(&self, object: &Value) -> Result<Value, String> {
        round_trip::<Endpoints>(object)
    }

    fn typed_schema(&self) -> Option<TypedSchema> {
        schema_of::<Endpoints>()
    }

    fn apply_defaults(&self, object: &mut Value) {
        let subsets = object.get_mut("subsets").and_then(Value::as_array_mut);
        for subset in subsets.into_iter().flatten() {
            let ports = subset.get_mut("ports").and_then(Value::as_array_mut);
            for port in ports.into_iter().flatten().filter_map(Value::as_object_mut) {
                default(port, "protocol", json!("TCP"));
            }
        }
    }

    async fn validate(&self, object: &Value, _old: Option<&Value>) -> Vec<Cause> {
        let mut causes = object_meta(object);
        for (i, subset) in items(&object["subsets"]).iter().enumerate() {
            let at = format!("subsets[{i}]");
            for list in ["addresses", "notReadyAddresses"] {
                for (j, address) in items(&subset[list]).iter().enumerate() {
                    let ip = &address["ip"];
                    if ip.as_str().and_then(|s| s.parse::<IpAddr>().ok()).is_none() {
                        causes.push(Cause::invalid(
                            format!("{at}.{list}[{j}].ip"),
                            ip,
                            "must be a valid IP address",
                        ));
                    }
                }
            }
            let ports = items(&subset["ports"]);
            for (j, port) in ports.iter().enumerate() {
                let p = format!("{at}.ports[{j}]");
                if ports.len() > 1 && port["name"].as_str().is_none_or(str::is_empty) {
                    causes.push(Cause::required(format!("{p}.name")));
                }
                if !port["port"].as_i64().is_some_and(|n| (1..=65535).contains(&n)) {
                    causes.push(Cause::invalid(
                        format!("{p}.port"),
                        &port["port"],
                        "must be between 1 and 65535, inclusive",
                    ));
                }
                let protocol = &port["protocol"];
                if !protocol.as_str().is_some_and(|s| PROTOCOLS.contains(&s)) {
                    causes.push(Cause::not_supported(format!("{p}.protocol"), protocol, PROTOCOLS));
                }
            }
        }
        causes
    }

    fn columns(&self) -> Vec<Column> {
        vec![Column::name(), Column::new("Endpoints", 0), Column::new("Age", 0)]
    }

    fn cells(&self, o: &Value, now: DateTime<Utc>) -> Vec<Value> {
        vec![name_cell(o), json!(endpoints_string(o)), age_cell(o, now)]
    }
}

/// The `Endpoints` cell: `ip:port` for each port and address (just the address in a subset
/// without ports), the first three, then ` + N more...`; `<none>` when empty.
fn endpoints_string(o: &Value) -> String {
    let mut all = Vec::new();
    for subset in items(&o["subsets"]) {
        let addresses = items(&subset["addresses"]);
        let ips = addresses.iter().map(|a| a["ip"].as_str().unwrap_or_default());
        let ports = items(&subset["ports"]);
        if ports.is_empty() {
            all.extend(ips.map(str::to_owned));
            continue;
        }
        for port in ports {
            let n = port["port"].as_i64().unwrap_or(0);
            for ip in ips.clone() {
                all.push(if ip.contains(':') {
                    format!("[{ip}]:{n}")
                } else {
                    format!("{ip}:{n}")
                });
            }
        }
    }
    if all.is_empty() {
        return "<none>".into();
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

    #[test]
    fn the_row_should_show_three_pairs_and_count_the_rest() {
        let o = json!({"subsets": [{"addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}],
            "ports": [{"name": "a", "port": 80}, {"name": "b", "port": 443}]}]});
        assert_eq!(endpoints_string(&o), "10.0.0.1:80,10.0.0.2:80,10.0.0.1:443 + 1 more...");
        assert_eq!(endpoints_string(&json!({})), "<none>");
    }

    #[test]
    fn addresses_and_ports_should_be_checked() {
        let mut o = json!({"metadata": {"name": "e", "namespace": "d"}, "subsets": [{
            "addresses": [{"ip": "nope"}], "ports": [{"port": 0}, {"name": "b", "port": 1}]}]});
        EndpointsStrategy.apply_defaults(&mut o);
        assert_eq!(o["subsets"][0]["ports"][1]["protocol"], "TCP");
        let fields: Vec<String> = futures::executor::block_on(EndpointsStrategy.validate(&o, None))
            .into_iter()
            .map(|c| c.field)
            .collect();
        assert_eq!(
            fields,
            ["subsets[0].addresses[0].ip", "subsets[0].ports[0].name", "subsets[0].ports[0].port"]
        );
    }
}
