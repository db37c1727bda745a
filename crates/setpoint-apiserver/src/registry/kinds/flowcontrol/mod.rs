//! flowcontrol.apiserver.k8s.io/v1 (API Priority and Fairness): FlowSchema
//! (`flow_schema.rs`) and PriorityLevelConfiguration (`priority_level.rs`). Stored only:
//! Setpoint's request limits do not read them, and it creates none of kube-apiserver's
//! bootstrap configuration.

mod flow_schema;
mod priority_level;

use crate::registry::ResourceDef;

pub(crate) fn resources() -> Vec<ResourceDef> {
    vec![flow_schema::resource(), priority_level::resource()]
}

/// The length of a JSON list (0 when absent).
fn count(v: &serde_json::Value) -> usize {
    v.as_array().map_or(0, Vec::len)
}
