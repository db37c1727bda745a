//! flowcontrol.apiserver.k8s.io/v1 (API Priority and Fairness): FlowSchema
//! (`flow_schema.rs`) and PriorityLevelConfiguration (`priority_level.rs`): their storage rules. The
//! server's request limits are compiled from them, and the default objects created and their
//! status kept, by `flowcontrol/` (API Priority and Fairness).

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
