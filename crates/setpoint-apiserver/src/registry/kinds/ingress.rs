//! networking.k8s.io/v1 Ingress: HTTP routes from hosts and paths to services. It needs a
//! default backend or rules; each path has a known `pathType` (an absolute path for `Exact`
//! and `Prefix`) and one backend: a service with a port name or number, or a resource. The
//! `status` subresource holds the load balancer's addresses (no ingress controller in
//! Setpoint); its row is `NAME CLASS HOSTS ADDRESS PORTS AGE`.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use k8s_openapi::api::networking::v1::Ingress;
use serde_json::{json, Value};
use setpoint_core::Cause;

use crate::registry::identity::{status, Identity, ALL_VERBS};
use crate::registry::strategy::{round_trip, schema_of, validate_name, NameRule, Strategy, TypedSchema};
use crate::registry::table::{age_cell, name_cell, Column};
use crate::registry::validation::object_meta;
use crate::registry::ResourceDef;

pub(crate) fn resources() -> Vec<ResourceDef> {
    vec![Identity {
        group: "networking.k8s.io",
        version: "v1",
        kind: "Ingress",
        plural: "ingresses",
        singular: "ingress",
        short_names: &["ing"],
        categories: &[],
        namespaced: true,
        verbs: ALL_VERBS,
    }
    .build(Arc::new(Ingresses), |g| vec![status(g)])]
}

const PATH_TYPES: &[&str] = &["Exact", "ImplementationSpecific", "Prefix"];

/// How many hosts the row shows.
const SHOWN_HOSTS: usize = 3;

#[derive(Debug)]
struct Ingresses;

fn items(v: &Value) -> &[Value] {
    v.as_array().map(Vec::as_slice).unwrap_or_default()
}

#[async_trait]
impl Strategy for Ingresses {
    fn normalize(&self, object: &Value) -> Result<Value, String> {
        round_trip::<Ingress>(object)
    }

    fn typed_schema(&self) -> Option<TypedSchema> {
        schema_of::<Ingress>()
    }

    fn has_generation(&self) -> bool {
        true
    }

    fn has_status(&self) -> bool {
        true
    }

    async fn validate(&self, object: &Value, _old: Option<&Value>) -> Vec<Cause> {
        let mut causes = object_meta(object);
        let spec = &object["spec"];
        let rules = items(&spec["rules"]);
        if spec["defaultBackend"].is_null() && rules.is_empty() {
            causes.push(Cause::invalid(
                "spec",
                &Value::Null,
                "either `defaultBackend` or `rules` must be specified",
            ));
        }
        if !spec["defaultBackend"].is_null() {
            backend(&spec["defaultBackend"], "spec.defaultBackend", &mut causes);
        }
        if let Some(class) = spec["ingressClassName"].as_str() {
            for problem in validate_name(class, NameRule::Subdomain) {
                causes.push(Cause::invalid("spec.ingressClassName", &spec["ingressClassName"], &problem));
            }
        }
        for (i, rule) in rules.iter().enumerate() {
            let at = format!("spec.rules[{i}]");
            if let Some(host) = rule["host"].as_str() {
                let plain = host.strip_prefix("*.").unwrap_or(host);
                if host.parse::<std::net::IpAddr>().is_ok() {
                    causes.push(Cause::invalid(format!("{at}.host"), &rule["host"], "must be a DNS name, not an IP address"));
                } else if !validate_name(plain, NameRule::Subdomain).is_empty() {
                    causes.push(Cause::invalid(
                        format!("{at}.host"),
                        &rule["host"],
                        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
                    ));
                }
            }
            if rule["http"].is_null() {
                continue;
            }
            let paths = items(&rule["http"]["paths"]);
            if paths.is_empty() {
                causes.push(Cause::required(format!("{at}.http.paths")));
            }
            for (j, path) in paths.iter().enumerate() {
                let p = format!("{at}.http.paths[{j}]");
                match path["pathType"].as_str() {
                    None => causes.push(Cause::new(
                        "FieldValueRequired",
                        format!("{p}.pathType"),
                        format!("{p}.pathType: Required value: pathType must be specified"),
                    )),
                    Some(t) if !PATH_TYPES.contains(&t) => {
                        causes.push(Cause::not_supported(format!("{p}.pathType"), &path["pathType"], PATH_TYPES));
                    }
                    Some("Exact" | "Prefix") => {
                        if !path["path"].as_str().is_some_and(|s| s.starts_with('/')) {
                            causes.push(Cause::invalid(format!("{p}.path"), &path["path"], "must be an absolute path"));
                        }
                    }
                    Some(_) => {}
                }
                backend(&path["backend"], &format!("{p}.backend"), &mut causes);
            }
        }
        causes
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::new("Class", 0),
            Column::new("Hosts", 0),
            Column::new("Address", 0),
            Column::new("Ports", 0),
            Column::new("Age", 0),
        ]
    }

    fn cells(&self, o: &Value, now: DateTime<Utc>) -> Vec<Value> {
        let spec = &o["spec"];
        let ports = if items(&spec["tls"]).is_empty() { "80" } else { "80, 443" };
        vec![
            name_cell(o),
            json!(spec["ingressClassName"].as_str().unwrap_or("<none>")),
            json!(hosts(items(&spec["rules"]))),
            json!(addresses(&o["status"]["loadBalancer"]["ingress"])),
            json!(ports),
            age_cell(o, now),
        ]
    }
}

/// The problems of a backend: a service or a resource, not both; a service's name and one of
/// a port name or number.
fn backend(b: &Value, at: &str, causes: &mut Vec<Cause>) {
    let (service, resource) = (&b["service"], &b["resource"]);
    match (service.is_null(), resource.is_null()) {
        (false, false) => causes.push(Cause::invalid(at, b, "cannot set both service and resource backends")),
        (true, true) => causes.push(Cause::invalid(at, b, "resource or service backend is required")),
        (false, true) => {
            if service["name"].as_str().is_none_or(str::is_empty) {
                causes.push(Cause::required(format!("{at}.service.name")));
            }
            let port = &service["port"];
            match (port["name"].as_str().filter(|n| !n.is_empty()), port["number"].as_i64()) {
                (Some(_), Some(_)) => causes.push(Cause::invalid(format!("{at}.service.port"), port, "cannot set both port name & port number")),
                (None, None) => causes.push(Cause::invalid(format!("{at}.service.port"), port, "port name or number is required")),
                (None, Some(n)) if !(1..=65535).contains(&n) => causes.push(Cause::invalid(
                    format!("{at}.service.port.number"),
                    &port["number"],
                    "must be between 1 and 65535, inclusive",
                )),
                _ => {}
            }
        }
        (true, false) => {
            for field in ["kind", "name"] {
                if resource[field].as_str().is_none_or(str::is_empty) {
                    causes.push(Cause::required(format!("{at}.resource.{field}")));
                }
            }
        }
    }
}

/// The `Hosts` cell: the rules' hosts, the first three then ` + N more...`; `*` if none.
fn hosts(rules: &[Value]) -> String {
    let named: Vec<&str> = rules
        .iter()
        .take(SHOWN_HOSTS)
        .filter_map(|r| r["host"].as_str().filter(|h| !h.is_empty()))
        .collect();
    if named.is_empty() {
        return "*".into();
    }
    let mut text = named.join(",");
    if rules.len() > SHOWN_HOSTS {
        text.push_str(&format!(" + {} more...", rules.len() - SHOWN_HOSTS));
    }
    text
}

/// The `Address` cell: the load balancer's IPs and hostnames, cut to 16 characters.
fn addresses(ingress: &Value) -> String {
    let all: Vec<&str> = items(ingress)
        .iter()
        .filter_map(|i| i["ip"].as_str().or_else(|| i["hostname"].as_str()))
        .collect();
    let text = all.join(",");
    if text.len() > 16 {
        format!("{}...", text.chars().take(13).collect::<String>())
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(spec: Value) -> Vec<String> {
        let o = json!({"metadata": {"name": "i", "namespace": "d"}, "spec": spec});
        futures::executor::block_on(Ingresses.validate(&o, None))
            .into_iter()
            .map(|c| c.field)
            .collect()
    }

    #[test]
    fn rules_paths_and_backends_should_be_checked() {
        let good = json!({"rules": [{"host": "foo.example.com", "http": {"paths": [
            {"path": "/", "pathType": "Prefix", "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}]});
        assert!(fields(good).is_empty());
        assert_eq!(fields(json!({})), ["spec"]);
        let bad = json!({"rules": [{"host": "10.0.0.1", "http": {"paths": [
            {"path": "rel", "pathType": "Exact", "backend": {"service": {"name": "web", "port": {}}}},
            {"path": "/", "backend": {"service": {"name": "web", "port": {"name": "http"}}}}]}}]});
        assert_eq!(
            fields(bad),
            [
                "spec.rules[0].host",
                "spec.rules[0].http.paths[0].path",
                "spec.rules[0].http.paths[0].backend.service.port",
                "spec.rules[0].http.paths[1].pathType"
            ]
        );
    }

    #[test]
    fn the_row_should_show_class_hosts_and_ports() {
        let o = json!({"metadata": {"name": "i"}, "spec": {"rules": [{"host": "a.com"}, {}], "tls": [{}]}});
        let cells = Ingresses.cells(&o, Utc::now());
        assert_eq!(cells[1..5], [json!("<none>"), json!("a.com"), json!(""), json!("80, 443")]);
    }
}
