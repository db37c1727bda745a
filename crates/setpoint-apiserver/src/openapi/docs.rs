//! The OpenAPI documents of what is served, serialized: generated from the registry when first
//! asked for, then kept until the served resources change (a new `Served`, new documents), each
//! with a content hash in the v3 index so kubectl's cache notices a change.
//! `handlers/openapi.rs` serves them.
//!
//! Lazily, because generating them is the dearest part of serving a new resource: a server that
//! installs a dozen CRDs at start would otherwise generate every document a dozen times, and
//! most of those documents are never read.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;

use crate::openapi::{self, OpenApiResource};
use crate::registry::{Registry, ResourceDef};

/// The documents of a set of served resources, each generated when first asked for.
pub(crate) struct OpenApiDocs {
    defs: Vec<Arc<ResourceDef>>,
    v3: OnceLock<V3Docs>,
    /// `GET /openapi/v2` (protobuf).
    v2: OnceLock<Bytes>,
}

/// The v3 documents, serialized.
struct V3Docs {
    /// `GET /openapi/v3`.
    index: Bytes,
    /// `GET /openapi/v3/<path>`, by path (`api/v1`, `apis/apps/v1`).
    group_versions: BTreeMap<String, Bytes>,
}

impl OpenApiDocs {
    /// The documents of the registry's resources, generated when first read.
    pub(crate) fn generate(registry: &Registry) -> OpenApiDocs {
        OpenApiDocs {
            defs: registry.all().cloned().collect(),
            v3: OnceLock::new(),
            v2: OnceLock::new(),
        }
    }

    fn resources(&self) -> Vec<OpenApiResource> {
        self.defs
            .iter()
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
            .collect()
    }

    fn v3(&self) -> &V3Docs {
        self.v3.get_or_init(|| {
            let resources = self.resources();
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
            V3Docs {
                index: Bytes::from(index),
                group_versions,
            }
        })
    }

    /// `GET /openapi/v3`.
    pub(crate) fn index(&self) -> &Bytes {
        &self.v3().index
    }

    /// The v3 document at `path` (`api/v1`, `apis/apps/v1`).
    pub(crate) fn group_version(&self, path: &str) -> Option<&Bytes> {
        self.v3().group_versions.get(path)
    }

    /// The v2 document (protobuf).
    pub(crate) fn v2(&self) -> &Bytes {
        self.v2
            .get_or_init(|| Bytes::from(openapi::v2_protobuf(&self.resources())))
    }
}
