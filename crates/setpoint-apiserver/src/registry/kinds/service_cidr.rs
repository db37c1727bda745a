//! networking.k8s.io/v1 ServiceCIDR (cluster-scoped, with a `status` subresource): a range
//! Service cluster IPs are taken from. `spec.cidrs` holds one CIDR, or two of different IP
//! families, and never changes. The server creates the default one, `kubernetes`, at start-up
//! holding its service range (10.96.0.0/12, the range the ClusterIP allocator uses) with a
//! `Ready` condition; ServiceCIDRs a client adds are stored and validated but do not widen the
//! range the allocator picks from. Its row is `NAME CIDRS AGE`.

use std::net::IpAddr;
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, SecondsFormat, Utc};
use k8s_openapi::api::networking::v1::ServiceCIDR;
use serde_json::{json, Value};
use setpoint_core::Cause;

use crate::registry::identity::{status, Identity, ALL_VERBS};
use crate::registry::strategy::{round_trip, schema_of, Strategy, TypedSchema};
use crate::registry::table::{age_cell, name_cell, Column};
use crate::registry::validation::{immutable, object_meta};
use crate::registry::ResourceDef;

use super::service::SERVICE_RANGE;

/// The name of the ServiceCIDR the server creates for its own service range.
pub(crate) const DEFAULT_SERVICE_CIDR: &str = "kubernetes";

pub(crate) fn resources() -> Vec<ResourceDef> {
    vec![Identity {
        group: "networking.k8s.io",
        version: "v1",
        kind: "ServiceCIDR",
        plural: "servicecidrs",
        singular: "servicecidr",
        short_names: &[],
        categories: &[],
        namespaced: false,
        verbs: ALL_VERBS,
    }
    .build(Arc::new(ServiceCidrs), |gvk| vec![status(gvk)])]
}

/// The default ServiceCIDR as created (its status is written after the create, which resets
/// status).
pub(crate) fn default_service_cidr() -> Value {
    json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "ServiceCIDR",
        "metadata": {"name": DEFAULT_SERVICE_CIDR},
        "spec": {"cidrs": [SERVICE_RANGE]},
    })
}

/// `object` with a `Ready=True` condition, unless it has one already.
pub(crate) fn with_ready_condition(object: &Value, now: DateTime<Utc>) -> Value {
    let mut object = object.clone();
    let ready = object["status"]["conditions"]
        .as_array()
        .is_some_and(|c| c.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"));
    if !ready {
        object["status"] = json!({"conditions": [{
            "type": "Ready",
            "status": "True",
            "reason": "",
            "message": "Kubernetes default Service CIDR is ready",
            "lastTransitionTime": now.to_rfc3339_opts(SecondsFormat::Secs, true),
        }]});
    }
    object
}

/// A CIDR's address, if `text` is one (`10.96.0.0/12`, `2001:db8::/64`).
pub(crate) fn parse_cidr(text: &str) -> Option<IpAddr> {
    let (ip, bits) = text.split_once('/')?;
    let ip: IpAddr = ip.parse().ok()?;
    if bits.is_empty() || bits.len() > 3 || !bits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let bits: u8 = bits.parse().ok()?;
    let max = if ip.is_ipv4() { 32 } else { 128 };
    (bits <= max).then_some(ip)
}

#[derive(Debug)]
struct ServiceCidrs;

#[async_trait]
impl Strategy for ServiceCidrs {
    fn normalize(&self, object: &Value) -> Result<Value, String> {
        round_trip::<ServiceCIDR>(object)
    }

    fn typed_schema(&self) -> Option<TypedSchema> {
        schema_of::<ServiceCIDR>()
    }

    fn has_status(&self) -> bool {
        true
    }

    async fn validate(&self, object: &Value, old: Option<&Value>) -> Vec<Cause> {
        let mut causes = object_meta(object);
        let spec = &object["spec"];
        let cidrs = spec["cidrs"].as_array().map(Vec::as_slice).unwrap_or_default();
        match cidrs.len() {
            0 => causes.push(Cause::new(
                "FieldValueRequired",
                "spec.cidrs",
                "spec.cidrs: Required value: at least one CIDR required",
            )),
            1 | 2 => {
                let parsed: Vec<Option<IpAddr>> =
                    cidrs.iter().map(|c| c.as_str().and_then(parse_cidr)).collect();
                for (i, (cidr, ip)) in cidrs.iter().zip(&parsed).enumerate() {
                    if ip.is_none() {
                        causes.push(Cause::invalid(
                            format!("spec.cidrs[{i}]"),
                            cidr,
                            "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)",
                        ));
                    }
                }
                if let [Some(a), Some(b)] = parsed.as_slice() {
                    if a.is_ipv4() == b.is_ipv4() {
                        causes.push(Cause::invalid(
                            "spec.cidrs",
                            spec,
                            "may specify no more than one IP for each IP family, i.e 192.168.0.0/24 and 2001:db8::/64",
                        ));
                    }
                }
            }
            _ => causes.push(Cause::invalid("spec.cidrs", spec, "may only hold up to 2 values")),
        }
        immutable(object, old, "/spec/cidrs", &mut causes);
        causes
    }

    fn columns(&self) -> Vec<Column> {
        vec![Column::name(), Column::new("CIDRs", 0), Column::new("Age", 0)]
    }

    fn cells(&self, o: &Value, now: DateTime<Utc>) -> Vec<Value> {
        let cidrs: Vec<&str> = o["spec"]["cidrs"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        vec![name_cell(o), json!(cidrs.join(",")), age_cell(o, now)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(o: &Value, old: Option<&Value>) -> Vec<String> {
        futures::executor::block_on(ServiceCidrs.validate(o, old))
            .into_iter()
            .map(|c| c.field)
            .collect()
    }

    fn cidr(cidrs: Value) -> Value {
        json!({"metadata": {"name": "extra"}, "spec": {"cidrs": cidrs}})
    }

    #[test]
    fn cidrs_should_be_one_or_one_per_family_and_fixed() {
        assert!(fields(&cidr(json!(["10.0.0.0/24"])), None).is_empty());
        assert!(fields(&cidr(json!(["10.0.0.0/24", "2001:db8::/64"])), None).is_empty());
        assert_eq!(fields(&cidr(json!([])), None), ["spec.cidrs"]);
        assert_eq!(fields(&cidr(json!(["10.0.0.0/24", "10.1.0.0/24"])), None), ["spec.cidrs"]);
        assert_eq!(fields(&cidr(json!(["a", "b", "c"])), None), ["spec.cidrs"]);
        assert_eq!(fields(&cidr(json!(["10.0.0.0/33"])), None), ["spec.cidrs[0]"]);
        assert_eq!(fields(&cidr(json!(["10.0.0.0"])), None), ["spec.cidrs[0]"]);
        let old = cidr(json!(["10.0.0.0/24"]));
        assert_eq!(fields(&cidr(json!(["10.0.1.0/24"])), Some(&old)), ["spec.cidrs"]);
    }

    #[test]
    fn the_default_should_hold_the_service_range_and_become_ready_once() {
        let object = default_service_cidr();
        assert!(fields(&object, None).is_empty());
        assert_eq!(ServiceCidrs.cells(&object, Utc::now())[1], "10.96.0.0/12");
        let ready = with_ready_condition(&object, Utc::now());
        assert_eq!(ready["status"]["conditions"][0]["type"], "Ready");
        assert_eq!(with_ready_condition(&ready, Utc::now() + chrono::Duration::hours(1)), ready);
    }
}
