//! The managed-resource loop: reconciling an object of the API with something outside it (a
//! database, a load balancer, a certificate on disk) that can drift, fail or be changed behind
//! the loop's back — pattern 3, API → outside world. Crossplane's managed reconciler is the
//! model: a provider supplies a [`Connector`] that reaches the outside system and an
//! [`ExternalClient`] that can observe, create, update and delete the external object for a
//! [`Managed`] object; [`ManagedReconciler`] does the rest, the same way for every provider:
//!
//! - the external object is named by the `crossplane.io/external-name` annotation (default:
//!   the object's name, written before anything is created);
//! - creation is bracketed by the `external-create-pending` / `-succeeded` / `-failed`
//!   annotations, so a crash between "create sent" and "result recorded" never creates twice;
//! - fields the external system defaulted are written back into the spec (late initialisation);
//! - `deletionPolicy: Delete | Orphan` with a finalizer, and `managementPolicies` (observe-only
//!   at least);
//! - conditions `Ready` and `Synced` with Crossplane's reasons;
//! - observation every poll interval (default 1 minute), at once on a spec change, exponential
//!   back-off on external errors;
//! - connection details written to the Secret `writeConnectionSecretToRef` names.
//!
//! `docs/patterns.md` is the guide to writing a provider with it.

mod annotations;
mod changes;
mod conditions;
mod connection;
mod create;
mod events;
mod object;
mod reconciler;
mod release;
mod run;

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use changes::changes;
pub use connection::CONNECTION_SECRET_TYPE;
pub use reconciler::{ManagedError, ManagedOptions, ManagedReconciler};

/// Annotation naming the external object (Crossplane's). Set to the object's name before the
/// first create when absent; a provider whose system chooses the name returns it from
/// [`ExternalClient::create`] and it is recorded here.
pub const EXTERNAL_NAME: &str = "crossplane.io/external-name";
/// Annotation set (to the time, RFC 3339) just before a create is sent.
pub const EXTERNAL_CREATE_PENDING: &str = "crossplane.io/external-create-pending";
/// Annotation set (to the time) once a create succeeded.
pub const EXTERNAL_CREATE_SUCCEEDED: &str = "crossplane.io/external-create-succeeded";
/// Annotation set (to the time) once a create failed.
pub const EXTERNAL_CREATE_FAILED: &str = "crossplane.io/external-create-failed";
/// Annotation that pauses reconciliation when `"true"` (`Synced=False`, reason
/// `ReconcilePaused`).
pub const PAUSED: &str = "crossplane.io/paused";
/// The finalizer that holds a managed object until its external object is deleted (or
/// orphaned), unless [`Managed::finalizer`] names another.
pub const FINALIZER: &str = "finalizer.managedresource.crossplane.io";

/// Condition types and reasons (Crossplane's).
pub mod condition {
    /// Whether the external object is ready for use.
    pub const READY: &str = "Ready";
    /// Whether the last reconcile succeeded.
    pub const SYNCED: &str = "Synced";
    /// Ready=True: the external object is available.
    pub const AVAILABLE: &str = "Available";
    /// Ready=False: the external object exists but is not (yet) available.
    pub const UNAVAILABLE: &str = "Unavailable";
    /// Ready=False: a create was sent.
    pub const CREATING: &str = "Creating";
    /// Ready=False: the object is being deleted.
    pub const DELETING: &str = "Deleting";
    /// Synced=True.
    pub const RECONCILE_SUCCESS: &str = "ReconcileSuccess";
    /// Synced=False: the message says what failed.
    pub const RECONCILE_ERROR: &str = "ReconcileError";
    /// Synced=False: the object carries `crossplane.io/paused: "true"`.
    pub const RECONCILE_PAUSED: &str = "ReconcilePaused";
}

/// What happens to the external object when the managed object is deleted.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum DeletionPolicy {
    /// The external object is deleted (the default).
    #[default]
    Delete,
    /// The external object is left in place.
    Orphan,
}

/// One thing the loop may do to the external object (`spec.managementPolicies`; default `["*"]`).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum ManagementAction {
    /// Everything below.
    #[serde(rename = "*")]
    All,
    /// Read the external object and report it in status.
    Observe,
    /// Create it when it does not exist.
    Create,
    /// Update it when it differs from the spec.
    Update,
    /// Delete it when the managed object is deleted (with `deletionPolicy: Delete`).
    Delete,
    /// Write fields the external system defaulted back into the spec.
    LateInitialize,
}

/// The fields every managed resource's spec has (Crossplane's `ResourceSpec`): flatten it into
/// a kind's spec with `#[serde(flatten)]`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceSpec {
    /// What happens to the external object when this object is deleted (default `Delete`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_policy: Option<DeletionPolicy>,
    /// What the loop may do (default `["*"]`; `["Observe"]` makes it observe-only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub management_policies: Option<Vec<ManagementAction>>,
    /// The provider configuration (which server, which credentials) to use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_config_ref: Option<ProviderConfigReference>,
    /// Where the connection details go: a Secret, made and kept by the loop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_connection_secret_to_ref: Option<SecretReference>,
}

impl ResourceSpec {
    /// `deletionPolicy`, defaulted.
    pub fn deletion_policy(&self) -> DeletionPolicy {
        self.deletion_policy.unwrap_or_default()
    }

    /// `managementPolicies`, defaulted (`["*"]`).
    pub fn management_policies(&self) -> ManagementPolicies {
        ManagementPolicies(
            self.management_policies
                .clone()
                .unwrap_or_else(|| vec![ManagementAction::All]),
        )
    }
}

/// A set of [`ManagementAction`]s.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManagementPolicies(pub Vec<ManagementAction>);

impl Default for ManagementPolicies {
    fn default() -> Self {
        ManagementPolicies(vec![ManagementAction::All])
    }
}

impl ManagementPolicies {
    /// Whether `action` is allowed (`*` allows all).
    pub fn allows(&self, action: ManagementAction) -> bool {
        self.0
            .iter()
            .any(|a| *a == ManagementAction::All || *a == action)
    }
}

/// A reference to a cluster-scoped provider configuration, by name.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct ProviderConfigReference {
    /// The ProviderConfig's name.
    pub name: String,
}

/// A Secret by namespace and name.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct SecretReference {
    /// Its name.
    pub name: String,
    /// Its namespace (for a namespaced managed object, default: the object's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// Connection details: Secret keys and their values.
pub type ConnectionDetails = BTreeMap<String, Vec<u8>>;

/// An object of the API whose actual state lives outside it. Implemented by a provider's kinds
/// (and, with the defaults, by built-in kinds such as a LoadBalancer `Service`).
pub trait Managed:
    kube::Resource<DynamicType = ()>
    + Clone
    + std::fmt::Debug
    + Serialize
    + serde::de::DeserializeOwned
    + Send
    + Sync
    + 'static
{
    /// The common spec fields, if the kind has them (`None`: every default).
    fn resource_spec(&self) -> Option<&ResourceSpec> {
        None
    }

    /// The object's `status.conditions` now (the loop updates `Ready` and `Synced` among them
    /// and keeps the others).
    fn conditions(&self) -> Vec<Condition>;

    /// The finalizer that holds the object until its external object is gone.
    fn finalizer() -> &'static str {
        FINALIZER
    }

    /// Whether this object wants an external object at all. A Service wants a balancer only
    /// while it is of type `LoadBalancer` with a class this loop serves; when this turns false
    /// the loop releases the external object as on deletion (honouring `deletionPolicy`) and
    /// removes its finalizer, and never adds the finalizer to an object that does not want one.
    fn wants_external(&self) -> bool {
        true
    }
}

/// The `loadBalancerClass` Setpoint's balancers serve (besides Services that name none).
pub const SERVICE_LB_CLASS: &str = "setpoint.dev/service-lb";
/// The finalizer kube's service controller puts on LoadBalancer Services.
pub const SERVICE_LB_FINALIZER: &str = "service.kubernetes.io/load-balancer-cleanup";

/// A Service is a managed object whose external object is its load balancer, when it is of
/// type `LoadBalancer` and names no class or [`SERVICE_LB_CLASS`].
impl Managed for k8s_openapi::api::core::v1::Service {
    fn conditions(&self) -> Vec<Condition> {
        self.status
            .as_ref()
            .and_then(|s| s.conditions.clone())
            .unwrap_or_default()
    }

    fn finalizer() -> &'static str {
        SERVICE_LB_FINALIZER
    }

    fn wants_external(&self) -> bool {
        self.spec.as_ref().is_some_and(|spec| {
            spec.type_.as_deref() == Some("LoadBalancer")
                && spec
                    .load_balancer_class
                    .as_deref()
                    .is_none_or(|class| class == SERVICE_LB_CLASS)
        })
    }
}

/// Whether the observed external object is ready for use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Readiness {
    /// `Ready=True`, reason `Available`.
    Available,
    /// `Ready=False`, reason `Unavailable`, with a message saying why.
    Unavailable(String),
}

/// What [`ExternalClient::observe`] saw.
#[derive(Clone, Debug)]
pub struct Observation {
    /// Whether the external object exists. `false` makes the loop create it (when allowed).
    pub exists: bool,
    /// Whether it matches the spec. `false` makes the loop update it (when allowed).
    pub up_to_date: bool,
    /// Why it is not up to date (for the `Synced` message and events), when known.
    pub diff: Option<String>,
    /// Fields the external system defaulted that the spec leaves unset, as a JSON merge patch of
    /// the object (`{"spec": {"forProvider": {…}}}`); applied when `LateInitialize` is allowed.
    pub late_initialized: Option<Value>,
    /// The observed state, as a JSON merge patch of `status` (`{"atProvider": {…}}`,
    /// `{"loadBalancer": {…}}`); written with the conditions.
    pub status: Option<Value>,
    /// Whether the external object is ready.
    pub readiness: Readiness,
    /// Connection details to publish (merged over those of create/update).
    pub connection_details: ConnectionDetails,
    /// Observe again no later than this (a certificate's renewal time); the poll interval
    /// otherwise.
    pub next_observation: Option<Duration>,
}

impl Observation {
    /// An external object that does not exist.
    pub fn missing() -> Observation {
        Observation {
            exists: false,
            up_to_date: false,
            diff: None,
            late_initialized: None,
            status: None,
            readiness: Readiness::Unavailable("the external object does not exist".to_owned()),
            connection_details: ConnectionDetails::new(),
            next_observation: None,
        }
    }

    /// An external object that exists, is up to date and available.
    pub fn available() -> Observation {
        Observation {
            exists: true,
            up_to_date: true,
            diff: None,
            late_initialized: None,
            status: None,
            readiness: Readiness::Available,
            connection_details: ConnectionDetails::new(),
            next_observation: None,
        }
    }
}

/// What [`ExternalClient::create`] made.
#[derive(Clone, Debug, Default)]
pub struct Creation {
    /// The external object's name, when the external system chose it (recorded in
    /// [`EXTERNAL_NAME`]); `None` keeps the annotation's.
    pub external_name: Option<String>,
    /// Connection details known only at creation (a generated password).
    pub connection_details: ConnectionDetails,
}

/// An error from the outside system: retried with back-off, and shown in `Synced`'s message.
pub type ExternalError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Reaches the outside system for one managed object: reads its provider configuration and
/// credentials and returns a client (Crossplane's `ExternalConnecter`).
pub trait Connector<M: Managed>: Send + Sync + 'static {
    /// The client it makes.
    type External: ExternalClient<M>;

    /// A client for `object`'s external object. Errors: `Synced=False`, retried with back-off.
    fn connect(
        &self,
        object: &M,
    ) -> impl Future<Output = Result<Self::External, ExternalError>> + Send;
}

/// Observes, creates, updates and deletes the external object of a managed object. Each
/// method is given the object as it is now; the external object's name is
/// [`external_name`]`(object)`. Every method must be idempotent.
pub trait ExternalClient<M: Managed>: Send + Sync {
    /// What the external object is now.
    fn observe(
        &self,
        object: &M,
    ) -> impl Future<Output = Result<Observation, ExternalError>> + Send;
    /// Creates it.
    fn create(&self, object: &M) -> impl Future<Output = Result<Creation, ExternalError>> + Send;
    /// Makes it match the spec; connection details that changed (a new password).
    fn update(
        &self,
        object: &M,
    ) -> impl Future<Output = Result<ConnectionDetails, ExternalError>> + Send;
    /// Deletes it (done when a later observe says it no longer exists).
    fn delete(&self, object: &M) -> impl Future<Output = Result<(), ExternalError>> + Send;
}

/// The name of `object`'s external object: its [`EXTERNAL_NAME`] annotation, else its name.
pub fn external_name<M: Managed>(object: &M) -> String {
    object
        .meta()
        .annotations
        .as_ref()
        .and_then(|a| a.get(EXTERNAL_NAME))
        .cloned()
        .unwrap_or_else(|| object.meta().name.clone().unwrap_or_default())
}

/// The default poll interval: how often an external object is observed when nothing changes.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(60);
