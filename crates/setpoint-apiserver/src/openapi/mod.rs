//! The OpenAPI documents kubectl reads, generated from the served resources: never upstream's
//! spec files.
//!
//! - `GET /openapi/v3` ([`v3_index`]) lists one document per group-version, and
//!   `GET /openapi/v3/api/v1`, `…/apis/<group>/<version>` ([`v3_group_version`]) is that
//!   document. kubectl ≥ 1.29 reads them to learn that the server supports `fieldValidation`
//!   (so `apply`/`create`/`replace` send `fieldValidation=Strict` instead of validating
//!   client-side); kubectl ≥ 1.27 reads them to compute `apply`'s strategic merge patch and
//!   for `explain`.
//! - `GET /openapi/v2` with `Accept: application/com.github.proto-openapi.spec.v2@v1.0+protobuf`
//!   ([`V2_PROTOBUF_ACCEPT`]) is [`v2_protobuf`], one document for every group-version as the
//!   gnostic `openapi_v2.Document` protobuf, answered with `Content-Type`
//!   [`V2_PROTOBUF_CONTENT_TYPE`] (no `@`: kubectl 1.27/1.28 reject it). kubectl 1.27 and 1.28
//!   load it for every `apply`/`create`/`replace` with default validation, and fail without
//!   it; newer ones fall back to it (e.g. when computing `apply`'s patch for a custom
//!   resource), and `explain --output=plaintext-openapiv2` reads it.
//!
//! Built-in kinds' schemas ([`builtin_schema`]) come from `k8s-openapi`'s `schemars` impls,
//! with Kubernetes' definition names (`io.k8s.api.core.v1.Pod`), descriptions, and the
//! `x-kubernetes-patch-strategy`/`x-kubernetes-patch-merge-key` that `kubectl apply` needs.
//! A custom resource's schema is its CRD's `openAPIV3Schema`, published under a reverse-DNS
//! name (`com.example.v1.Widget`) with `apiVersion`, `kind` and `metadata` (as `ObjectMeta`)
//! filled in, as kube-apiserver does.
//!
//! Every function here is pure: the caller decides when to regenerate and how to hash.
//! The documents promise:
//! - every operation carries `x-kubernetes-group-version-kind` and `x-kubernetes-action`;
//! - every PATCH operation declares the `fieldValidation` query parameter, and lists
//!   `application/strategic-merge-patch+json` only for built-in kinds;
//! - every schema a document references is in it, and every kind's schema carries
//!   `x-kubernetes-group-version-kind` as a list, which is how `kubectl explain` finds it.

mod builtin;
mod docs;
mod operation;
mod params;
mod patch_meta;
mod paths;
mod schema;
mod v2;
mod v2_proto;
mod v3;

#[cfg(test)]
mod tests;

pub(crate) use builtin::builtin_schema;
pub(crate) use docs::OpenApiDocs;
pub(crate) use v2::{v2_protobuf, with_definitions, V2_PROTOBUF_ACCEPT, V2_PROTOBUF_CONTENT_TYPE};
pub(crate) use v3::{v3_group_version, v3_index};

/// One served resource, as the OpenAPI documents describe it.
#[derive(Clone, Debug)]
pub(crate) struct OpenApiResource {
    /// API group; `""` for the core group.
    pub(crate) group: String,
    /// API version, e.g. `v1`.
    pub(crate) version: String,
    /// Kind, e.g. `Pod`.
    pub(crate) kind: String,
    /// Resource name in URLs, e.g. `pods`.
    pub(crate) plural: String,
    /// Whether objects live in a namespace (`/namespaces/{namespace}/…` paths).
    pub(crate) namespaced: bool,
    /// Subresources with operations: `status`, `scale`, `log`, `binding`, `finalize`.
    /// Others are left out of the documents.
    pub(crate) subresources: Vec<String>,
    /// Discovery verbs (`get`, `list`, `watch`, `create`, `update`, `patch`, `delete`,
    /// `deletecollection`); they decide which operations the main paths have.
    pub(crate) verbs: Vec<String>,
    /// The kind's OpenAPI v3 schema: [`builtin_schema`]'s answer for built-in kinds (its
    /// `$ref`s name schemas the documents supply), a CRD version's `openAPIV3Schema` for
    /// custom resources.
    pub(crate) schema: serde_json::Value,
}
