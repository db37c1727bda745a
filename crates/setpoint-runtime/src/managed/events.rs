//! The reasons of the events the managed-resource loop records about a managed object
//! (Crossplane's, so tooling that knows them reads ours).

/// Warning: the finalizer or the external name could not be written, or a create's result is
/// unknown.
pub(super) const CANNOT_INITIALIZE: &str = "CannotInitializeManagedResource";
/// Warning: `connect` failed.
pub(super) const CANNOT_CONNECT: &str = "CannotConnectToProvider";
/// Warning: `observe` failed.
pub(super) const CANNOT_OBSERVE: &str = "CannotObserveExternalResource";
/// Warning: `create` failed.
pub(super) const CANNOT_CREATE: &str = "CannotCreateExternalResource";
/// Warning: `update` failed.
pub(super) const CANNOT_UPDATE: &str = "CannotUpdateExternalResource";
/// Warning: `delete` failed.
pub(super) const CANNOT_DELETE: &str = "CannotDeleteExternalResource";
/// Warning: the connection Secret could not be written.
pub(super) const CANNOT_PUBLISH: &str = "CannotPublishConnectionDetails";
/// Warning: the managed object could not be written (create annotations, late
/// initialisation).
pub(super) const CANNOT_UPDATE_MANAGED: &str = "CannotUpdateManagedResource";
/// Normal: a create was sent.
pub(super) const CREATED: &str = "CreatedExternalResource";
/// Normal: an update was sent.
pub(super) const UPDATED: &str = "UpdatedExternalResource";
/// Normal: a delete was sent.
pub(super) const DELETED: &str = "DeletedExternalResource";
/// Normal: the object is paused.
pub(super) const RECONCILIATION_PAUSED: &str = "ReconciliationPaused";
