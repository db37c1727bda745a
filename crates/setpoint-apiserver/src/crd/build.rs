//! From a stored CRD to the resources it serves: one `ResourceDef` per served version, in
//! Kubernetes' version priority order ([`compare_versions`]: GA before beta before alpha,
//! higher numbers first), so the first is the group's preferred version.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Weak};

use serde_json::Value;
use setpoint_core::{GroupResource, GroupVersionKind};

use super::conversion::Webhook;
use super::jsonpath::JsonPath;
use super::scale::ScalePaths;
use super::schema::Schema;
use super::table::PrinterColumn;
use super::CustomResource;
use crate::api::Api;
use crate::registry::{compare_versions, ResourceDef, Subresource, ALL_VERBS, STATUS_VERBS};

/// Where CRDs are stored.
pub(crate) const CRD_PREFIX: &str = "/registry/apiextensions.k8s.io/customresourcedefinitions/";

fn text<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or_default()
}

fn strings(v: &Value, key: &str) -> Vec<String> {
    v.get(key)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The resources a CRD serves (its served versions), or why it cannot serve them.
pub(crate) fn resources_of(crd: &Value, api: &Weak<Api>) -> Result<Vec<ResourceDef>, String> {
    let name = crd["metadata"]["name"].as_str().unwrap_or_default();
    let spec = &crd["spec"];
    let group = text(spec, "group");
    let names = &spec["names"];
    let kind = text(names, "kind");
    let plural = text(names, "plural");
    if group.is_empty() || kind.is_empty() || plural.is_empty() {
        return Err("spec.group, spec.names.kind and spec.names.plural are required".into());
    }
    let singular = match text(names, "singular") {
        "" => kind.to_lowercase(),
        s => s.to_owned(),
    };
    let list_kind = match text(names, "listKind") {
        "" => format!("{kind}List"),
        s => s.to_owned(),
    };
    let versions = spec["versions"].as_array().cloned().unwrap_or_default();
    let storage = versions
        .iter()
        .find(|v| v["storage"] == Value::Bool(true))
        .map(|v| text(v, "name").to_owned())
        .ok_or("no storage version")?;
    let mut served: Vec<&Value> = versions
        .iter()
        .filter(|v| v["served"] == Value::Bool(true))
        .collect();
    served.sort_by(|a, b| compare_versions(text(a, "name"), text(b, "name")));
    let webhook = Webhook::of_spec(spec, api);
    let mut defs = Vec::new();
    for (i, v) in served.into_iter().enumerate() {
        let version = text(v, "name");
        let gvk = GroupVersionKind::new(group, version, kind);
        let raw_schema = v["schema"]["openAPIV3Schema"].clone();
        let schema = Schema::compile(
            &raw_schema,
            &format!("spec.versions[{i}].schema.openAPIV3Schema"),
        )?;
        let status = v["subresources"]
            .get("status")
            .is_some_and(|s| !s.is_null());
        let scale = match v["subresources"].get("scale") {
            Some(s) if !s.is_null() => Some(ScalePaths::parse(s)?),
            _ => None,
        };
        let columns = match v["additionalPrinterColumns"].as_array() {
            Some(cols) if !cols.is_empty() => cols
                .iter()
                .map(PrinterColumn::parse)
                .collect::<Result<_, _>>()?,
            _ => vec![PrinterColumn::age()],
        };
        let selectable = v["selectableFields"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .filter_map(|f| f["jsonPath"].as_str())
            .map(|p| Ok((p.trim_start_matches('.').to_owned(), JsonPath::parse(p)?)))
            .collect::<Result<Vec<_>, String>>()?;
        let mut subresources = Vec::new();
        if status {
            subresources.push(Subresource {
                name: "status",
                kind: gvk.clone(),
                verbs: STATUS_VERBS,
            });
        }
        if scale.is_some() {
            subresources.push(Subresource {
                name: "scale",
                kind: GroupVersionKind::new("autoscaling", "v1", "Scale"),
                verbs: STATUS_VERBS,
            });
        }
        let custom = CustomResource {
            crd_name: name.to_owned(),
            group_resource: GroupResource::new(group, plural),
            api_version: gvk.api_version(),
            storage_api_version: format!("{group}/{storage}"),
            list_kind: list_kind.clone(),
            schema: Arc::new(schema),
            raw_schema,
            status,
            scale,
            columns,
            selectable,
            webhook: webhook.clone(),
            spec: spec.clone(),
            terminating: AtomicBool::new(false),
        };
        defs.push(ResourceDef {
            gvk,
            plural: plural.to_owned(),
            singular: singular.clone(),
            short_names: strings(names, "shortNames"),
            categories: strings(names, "categories"),
            namespaced: text(spec, "scope") != "Cluster",
            verbs: ALL_VERBS,
            subresources,
            key_prefix: format!("/registry/{group}/{plural}/"),
            strategy: Arc::new(custom),
        });
    }
    Ok(defs)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_crd_should_serve_its_served_versions_storing_in_one() {
        let crd = json!({"metadata": {"name": "widgets.example.com"}, "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"]},
            "versions": [
                {"name": "v1beta1", "served": true, "storage": false, "schema": {"openAPIV3Schema": {"type": "object"}}},
                {"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object"}},
                 "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}}},
                {"name": "v0", "served": false, "storage": false, "schema": {"openAPIV3Schema": {"type": "object"}}}]}});
        let defs = resources_of(&crd, &Weak::new()).unwrap();
        assert_eq!(defs.len(), 2);
        assert_eq!(defs[0].gvk.version, "v1");
        assert_eq!(defs[0].singular, "widget");
        assert_eq!(defs[0].list_kind(), "WidgetList");
        assert!(defs[0].has_subresource("scale") && defs[0].strategy.has_status());
        assert!(!defs[1].strategy.has_status());
        let stored = defs[1]
            .strategy
            .to_storage(json!({"apiVersion": "example.com/v1beta1", "kind": "Widget"}));
        assert_eq!(stored["apiVersion"], "example.com/v1");
        assert_eq!(
            defs[1].strategy.served_from_storage(stored)["apiVersion"],
            "example.com/v1beta1"
        );
    }
}
