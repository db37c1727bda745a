//! The admission hook of the registry store: where a write's object is handed to admission
//! (`admission/`: webhooks) — mutation after the kind's defaults and before validation,
//! validation after the kind's validation and just before the write.
//!
//! Admission needs to know who asked and how (the user, the subresource, the request's
//! options), which the registry store does not, so it is carried by the request: the HTTP
//! handlers run a request's registry-store call inside [`admitting`], which binds an [`Admit`]
//! for that request to the task. A write made outside such a scope (the server's own
//! bootstrap, the CRD controller, the internal updates a delete or a binding makes) is not
//! sent to admission.

use std::future::Future;
use std::sync::Arc;

use serde_json::Value;
use setpoint_core::ApiError;

use super::RegistryStore;
use crate::registry::ResourceDef;

/// What a write does to its object, as admission names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Operation {
    Create,
    Update,
    Delete,
}

impl Operation {
    /// `CREATE`, `UPDATE` or `DELETE`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
        }
    }
}

/// Admission for one request.
#[async_trait::async_trait]
pub(crate) trait Admit: Send + Sync {
    /// Lets mutating admission change `object` (`None` on a delete, which has only `old`);
    /// returns whether it changed.
    async fn mutate(
        &self,
        def: &ResourceDef,
        operation: Operation,
        object: Option<&mut Value>,
        old: Option<&Value>,
        dry_run: bool,
    ) -> Result<bool, ApiError>;

    /// Asks validating admission whether the write may go ahead.
    async fn validate(
        &self,
        def: &ResourceDef,
        operation: Operation,
        object: Option<&Value>,
        old: Option<&Value>,
        dry_run: bool,
    ) -> Result<(), ApiError>;
}

tokio::task_local! {
    static ADMISSION: Arc<dyn Admit>;
}

/// Runs `f` (a request's call into a registry store) with `admit` as its admission.
pub(crate) async fn admitting<F: Future>(admit: Arc<dyn Admit>, f: F) -> F::Output {
    ADMISSION.scope(admit, f).await
}

/// The admission of the request the current task serves, if any.
fn current() -> Option<Arc<dyn Admit>> {
    ADMISSION.try_with(Arc::clone).ok()
}

impl RegistryStore {
    /// Mutating admission of a write (no-op outside a request scope); whether it changed
    /// `object`.
    pub(super) async fn admit_mutation(
        &self,
        operation: Operation,
        object: Option<&mut Value>,
        old: Option<&Value>,
        dry_run: bool,
    ) -> Result<bool, ApiError> {
        match current() {
            Some(admit) => {
                admit
                    .mutate(&self.def, operation, object, old, dry_run)
                    .await
            }
            None => Ok(false),
        }
    }

    /// Validating admission of a write (no-op outside a request scope).
    pub(super) async fn admit_validation(
        &self,
        operation: Operation,
        object: Option<&Value>,
        old: Option<&Value>,
        dry_run: bool,
    ) -> Result<(), ApiError> {
        match current() {
            Some(admit) => {
                admit
                    .validate(&self.def, operation, object, old, dry_run)
                    .await
            }
            None => Ok(()),
        }
    }
}
