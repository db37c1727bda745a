//! The OpenAPI documents of what is served, serialized: generated once from the registry when
//! the API starts (they change only when the served resources do), each with a content hash in
//! the v3 index so kubectl's cache notices a change. `handlers/openapi.rs` serves them.

use std::collections::BTreeMap;

use bytes::Bytes;

use crate::openapi::{self, OpenApiResource};
use crate::registry::Registry;

/// The documents, serialized.
pub(crate) struct OpenApiDocs {
    /// `GET /openapi/v3`.
    index: Bytes,
    /// `GET /openapi/v3/<path>`, by path (`api/v1`, `apis/apps/v1`).
    group_versions: BTreeMap<String, Bytes>,
    /// `GET /openapi/v2` (protobuf).
    v2: Bytes,
}

impl OpenApiDocs {
    /// Generates every document for the registry's resources.
    pub(crate) fn generate(registry: &Registry) -> OpenApiDocs {
        let resources: Vec<OpenApiResource> = registry
            .all()
            .map(|d| OpenApiResource {
                group: d.gvk.group.clone(),
                version: d.gvk.version.clone(),
                kind: d.gvk.kind.clone(),
                plural: d.plural.clone(),
                namespaced: d.namespaced,
                subresources: d.subresources.iter().map(|s| s.name.to_owned()).collect(),
                verbs: d.verbs.iter().map(|v| (*v).to_owned()).collect(),
                schema: match d.strategy.openapi_schema() {
                    Some(schema) => schema.clone(),
                    None => openapi::builtin_schema(&d.gvk.group, &d.gvk.version, &d.gvk.kind)
                        .unwrap_or_else(|| serde_json::json!({"type": "object"})),
                },
            })
            .collect();
        let mut gvs: Vec<(String, String)> = resources
            .iter()
            .map(|r| (r.group.clone(), r.version.clone()))
            .collect();
        gvs.sort();
        gvs.dedup();
        let mut group_versions = BTreeMap::new();
        let mut hasher = 0u32;
        for (g, v) in &gvs {
            let doc = openapi::v3_group_version(g, v, &resources);
            let bytes = Bytes::from(serde_json::to_vec(&doc).expect("serializes"));
            hasher = crc32c::crc32c_append(hasher, &bytes);
            let path = if g.is_empty() {
                format!("api/{v}")
            } else {
                format!("apis/{g}/{v}")
            };
            group_versions.insert(path, bytes);
        }
        let hash = format!("{hasher:08X}");
        let index = serde_json::to_vec(&openapi::v3_index(&gvs, &hash)).expect("serializes");
        OpenApiDocs {
            index: Bytes::from(index),
            group_versions,
            v2: Bytes::from(openapi::v2_protobuf(&resources)),
        }
    }

    /// `GET /openapi/v3`.
    pub(crate) fn index(&self) -> &Bytes {
        &self.index
    }

    /// The v3 document at `path` (`api/v1`, `apis/apps/v1`).
    pub(crate) fn group_version(&self, path: &str) -> Option<&Bytes> {
        self.group_versions.get(path)
    }

    /// The v2 document (protobuf).
    pub(crate) fn v2(&self) -> &Bytes {
        &self.v2
    }
}
