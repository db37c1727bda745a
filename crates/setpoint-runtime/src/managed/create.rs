//! The steps of a reconcile that write the managed object before and around a create: the
//! finalizer and the default external name (one guarded write), the create itself bracketed by
//! the create-guard annotations, and late initialisation of the spec.

use chrono::Utc;
use serde_json::{json, Value};

use crate::managed::annotations::{self, timestamp};
use crate::managed::condition::{CREATING, RECONCILE_ERROR, RECONCILE_SUCCESS};
use crate::managed::conditions::{Mark, Verdict};
use crate::managed::events::{CANNOT_CREATE, CANNOT_PUBLISH, CANNOT_UPDATE_MANAGED, CREATED};
use crate::managed::object::to_json;
use crate::managed::run::Run;
use crate::managed::{
    Connector, ExternalClient, Managed, ManagedError, ManagementAction, Observation,
    EXTERNAL_CREATE_FAILED, EXTERNAL_CREATE_PENDING, EXTERNAL_CREATE_SUCCEEDED, EXTERNAL_NAME,
};
use crate::{Action, EventDetails};

/// The `Synced` message when the external object is missing and may not be created.
pub(super) const DOES_NOT_EXIST: &str = "external resource does not exist";

impl<M: Managed, C: Connector<M>> Run<'_, M, C> {
    /// Adds the finalizer and the default external name (the object's name), whichever are
    /// missing, in one write guarded by the object's version.
    pub(super) async fn initialize(&mut self) -> Result<(), ManagedError> {
        let meta = self.object.meta();
        let finalizers = meta.finalizers.clone().unwrap_or_default();
        let mut metadata = serde_json::Map::new();
        if !finalizers.iter().any(|f| f == M::finalizer()) {
            let mut finalizers = finalizers;
            finalizers.push(M::finalizer().to_owned());
            metadata.insert("finalizers".to_owned(), json!(finalizers));
        }
        if annotations::get(&self.object, EXTERNAL_NAME).is_none() {
            let name = meta.name.clone().unwrap_or_default();
            metadata.insert("annotations".to_owned(), json!({ EXTERNAL_NAME: name }));
        }
        if metadata.is_empty() {
            return Ok(());
        }
        self.patch(
            "adding the finalizer and the external name",
            json!({ "metadata": metadata }),
            true,
        )
        .await
    }

    /// Step 8: the external object does not exist — create it if allowed, bracketed by the
    /// create-guard annotations.
    pub(super) async fn create(&mut self, external: &C::External) -> Result<Action, ManagedError> {
        let options = &self.reconciler.options;
        if !self.policies().allows(ManagementAction::Create) {
            self.write(Verdict::default().synced(Mark::no(RECONCILE_ERROR, DOES_NOT_EXIST)))
                .await?;
            return Ok(Action::requeue(options.poll_interval));
        }
        let creating = Verdict::default().ready(Mark::no(CREATING, ""));
        let pending = [(EXTERNAL_CREATE_PENDING, timestamp(Utc::now()))];
        if let Err(error) = self
            .annotate("marking the create pending", &pending, true)
            .await
        {
            return self
                .fail_with_event(CANNOT_UPDATE_MANAGED, "Create", creating, error)
                .await;
        }
        let creation = match external.create(&self.object).await {
            Ok(creation) => creation,
            Err(source) => {
                let failed = [(EXTERNAL_CREATE_FAILED, timestamp(Utc::now()))];
                if let Err(error) = self.record_outcome(&failed).await {
                    self.event(
                        EventDetails::warning(CANNOT_UPDATE_MANAGED, "Create")
                            .with_note(error.to_string()),
                    );
                }
                let error = ManagedError::External {
                    what: "create",
                    source,
                };
                return self
                    .fail_with_event(CANNOT_CREATE, "Create", creating, error)
                    .await;
            }
        };
        let mut outcome = vec![(EXTERNAL_CREATE_SUCCEEDED, timestamp(Utc::now()))];
        if let Some(name) = creation.external_name {
            outcome.push((EXTERNAL_NAME, name));
        }
        if let Err(error) = self.record_outcome(&outcome).await {
            return self
                .fail_with_event(CANNOT_UPDATE_MANAGED, "Create", creating, error)
                .await;
        }
        self.event(
            EventDetails::normal(CREATED, "Create")
                .with_note("Successfully requested creation of external resource"),
        );
        if let Err(error) = self.publish(&creation.connection_details).await {
            return self
                .fail_with_event(CANNOT_PUBLISH, "Publish", creating, error)
                .await;
        }
        self.write(creating.synced(Mark::yes(RECONCILE_SUCCESS)))
            .await?;
        Ok(Action::requeue(self.reconciler.options.after_create))
    }

    /// Step 9's first part: writes the fields the external system defaulted into the spec,
    /// when allowed and when they change the object.
    pub(super) async fn late_initialize(
        &mut self,
        observation: &Observation,
    ) -> Result<(), ManagedError> {
        let Some(Value::Object(patch)) = &observation.late_initialized else {
            return Ok(());
        };
        if patch.is_empty() || !self.policies().allows(ManagementAction::LateInitialize) {
            return Ok(());
        }
        let current = to_json(&self.object);
        let changes = setpoint_core::merge_patch(current.clone(), Value::Object(patch.clone()))
            .is_ok_and(|patched| patched != current);
        if !changes {
            return Ok(());
        }
        self.patch(
            "late-initialising the spec",
            Value::Object(patch.clone()),
            true,
        )
        .await
    }
}
