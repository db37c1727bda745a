//! Calling a request's webhooks in order: for each, whether it matches, the dry-run rule, the
//! call, the failure policy, the verdict (denial, warnings, patch). Mutating webhooks run one
//! after the other on the object as the previous ones left it, then those with
//! `reinvocationPolicy: IfNeeded` once more if a later one changed the object; validating
//! webhooks one after the other on the final object.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use serde_json::{json, Value};
use setpoint_core::ApiError;

use super::configurations::{FailurePolicy, SideEffects, Webhook};
use super::matching::{labels_of, needs_namespace, Attributes};
use super::review::{denial, read_response, ReviewRequest};
use super::RequestAdmission;
use crate::registry::store::{Admit, Operation, RegistryStore};
use crate::registry::ResourceDef;

/// What calling one webhook came to.
enum Outcome {
    /// It does not apply to the request (or failed and is ignored).
    Skipped,
    /// It was called and allowed the request; `changed` if its patch changed the object.
    Called { changed: bool },
}

#[async_trait::async_trait]
impl Admit for RequestAdmission {
    async fn mutate(
        &self,
        def: &ResourceDef,
        operation: Operation,
        object: Option<&mut Value>,
        old: Option<&Value>,
        dry_run: bool,
    ) -> Result<bool, ApiError> {
        if !self.covers(def) {
            return Ok(false);
        }
        let mut object = object;
        let mut defaulted = false;
        if let Some(builtin) = &self.builtin {
            defaulted = builtin
                .mutate(def, operation, object.as_deref_mut())
                .await?;
        }
        if let Some(certificates) = &self.certificates {
            defaulted |= certificates.mutate(operation, object.as_deref_mut(), old);
        }
        if self.mutating.is_empty() {
            return Ok(defaulted);
        }
        let mut view = object.as_deref().map(|o| self.view(o));
        let old_view = old.map(|o| self.view(o));
        // `version` counts the changes; each call remembers how many there were after it.
        let mut version = 0_u32;
        let mut called = Vec::new();
        for (i, webhook) in self.mutating.iter().enumerate() {
            let outcome = self
                .call(
                    webhook,
                    operation,
                    view.as_mut(),
                    old_view.as_ref(),
                    dry_run,
                    true,
                )
                .await?;
            if let Outcome::Called { changed } = outcome {
                version += u32::from(changed);
                called.push((i, version));
            }
        }
        if version == 0 {
            return Ok(defaulted);
        }
        for (i, seen) in called {
            let webhook = &self.mutating[i];
            if webhook.reinvoke && seen < version {
                self.call(
                    webhook,
                    operation,
                    view.as_mut(),
                    old_view.as_ref(),
                    dry_run,
                    true,
                )
                .await?;
            }
        }
        if let (Some(object), Some(view)) = (object, view) {
            self.write_back(object, view);
        }
        Ok(true)
    }

    async fn validate(
        &self,
        def: &ResourceDef,
        operation: Operation,
        object: Option<&Value>,
        old: Option<&Value>,
        dry_run: bool,
    ) -> Result<(), ApiError> {
        if !self.covers(def) {
            return Ok(());
        }
        if let Some(restriction) = &self.node_restriction {
            restriction.validate(def, operation, object, old)?;
        }
        if let Some(builtin) = &self.builtin {
            builtin.validate_limits(def, operation, object)?;
            builtin
                .validate_service_account(def, operation, object)
                .await?;
        }
        if let Some(certificates) = &self.certificates {
            certificates.validate(def, operation, object, old)?;
        }
        self.validate_dynamic(operation, object, old, dry_run)
            .await?;
        if let Some(builtin) = &self.builtin {
            builtin
                .charge_quotas(def, operation, object, old, dry_run)
                .await?;
        }
        Ok(())
    }
}

impl RequestAdmission {
    /// The validating policies and webhooks.
    async fn validate_dynamic(
        &self,
        operation: Operation,
        object: Option<&Value>,
        old: Option<&Value>,
        dry_run: bool,
    ) -> Result<(), ApiError> {
        if self.validating.is_empty() && self.bindings.is_empty() {
            return Ok(());
        }
        let mut view = object.map(|o| self.view(o));
        let old_view = old.map(|o| self.view(o));
        self.check_policies(operation, view.as_ref(), old_view.as_ref(), dry_run)
            .await?;
        for webhook in self.validating.iter() {
            self.call(
                webhook,
                operation,
                view.as_mut(),
                old_view.as_ref(),
                dry_run,
                false,
            )
            .await?;
        }
        Ok(())
    }
}

impl RequestAdmission {
    /// Whether a registry-store call is the request's own (not another resource's write made
    /// while serving it).
    fn covers(&self, def: &ResourceDef) -> bool {
        def.gvk == self.def.gvk && def.plural == self.def.plural
    }

    fn scale_request(&self) -> bool {
        self.subresource == "scale"
    }

    /// The object as webhooks see it: a `Scale` for the scale subresource, else itself.
    pub(super) fn view(&self, object: &Value) -> Value {
        match self.def.strategy.scale() {
            Some(scale) if self.scale_request() => scale.scale_of(object),
            _ => object.clone(),
        }
    }

    /// Puts what the webhooks made of the view back into the object.
    fn write_back(&self, object: &mut Value, view: Value) {
        match self.def.strategy.scale() {
            Some(scale) if self.scale_request() => {
                if let Some(replicas) = view["spec"]["replicas"].as_i64() {
                    scale.set_replicas(object, replicas);
                }
            }
            _ => *object = view,
        }
    }

    /// The group, version and kind of the objects webhooks see at `version`.
    fn kind_at(&self, version: &str) -> Value {
        if self.scale_request() {
            return json!({"group": "autoscaling", "version": "v1", "kind": "Scale"});
        }
        json!({"group": self.def.gvk.group, "version": version, "kind": self.def.gvk.kind})
    }

    fn resource_at(&self, version: &str) -> Value {
        json!({"group": self.def.gvk.group, "version": version, "resource": self.def.plural})
    }

    /// The namespace as rules see it: a namespace's own name for requests on namespaces.
    pub(super) fn rule_namespace(&self, object: Option<&Value>, old: Option<&Value>) -> String {
        if self.is_namespace_resource() {
            let named = object.or(old).and_then(|o| o["metadata"]["name"].as_str());
            return named.unwrap_or(&self.name).to_owned();
        }
        self.namespace.clone().unwrap_or_default()
    }

    pub(super) fn is_namespace_resource(&self) -> bool {
        self.def.gvk.group.is_empty() && self.def.plural == "namespaces"
    }

    /// The labels the namespace selector is matched against; `None` for cluster-scoped
    /// objects other than namespaces (which always match).
    pub(super) async fn namespace_labels(
        &self,
        namespace: &str,
        object: Option<&Value>,
        old: Option<&Value>,
    ) -> Result<Option<BTreeMap<String, String>>, ApiError> {
        if self.is_namespace_resource() {
            return Ok(object.or(old).map(labels_of));
        }
        if namespace.is_empty() {
            return Ok(None);
        }
        let namespaces = self
            .served
            .store("", "v1", "namespaces")
            .ok_or_else(|| ApiError::internal("namespaces are not served"))?;
        let ns = namespaces.get(None, namespace).await.map_err(|e| {
            ApiError::internal(format!(
                "the namespace {namespace:?} of the request cannot be read: {}",
                e.message
            ))
        })?;
        Ok(Some(labels_of(&ns)))
    }

    /// The review's `request` for objects at `version`.
    pub(super) fn review_request<'a>(
        &'a self,
        version: &str,
        operation: Operation,
        name: &'a str,
        namespace: &'a str,
        (object, old): (Option<&'a Value>, Option<&'a Value>),
        dry_run: bool,
    ) -> ReviewRequest<'a> {
        ReviewRequest {
            uid: &self.uid,
            kind: self.kind_at(version),
            resource: self.resource_at(version),
            subresource: &self.subresource,
            request_kind: self.kind_at(&self.def.gvk.version),
            request_resource: self.resource_at(&self.def.gvk.version),
            name,
            namespace,
            operation: operation.as_str(),
            user_info: &self.user_info,
            object,
            old_object: old,
            dry_run,
            options: self.options(operation.as_str(), dry_run),
        }
    }

    /// An object as sent to a webhook that matched `version` (`matchPolicy: Equivalent`):
    /// converted through the storage version as a read at that version would be (a built-in
    /// kind's version rules, a CRD's conversion); itself when `version` is the request's.
    async fn at_version<'a>(
        &self,
        object: &'a Value,
        version: &str,
    ) -> Result<Cow<'a, Value>, ApiError> {
        if self.scale_request() || version == self.def.gvk.version {
            return Ok(Cow::Borrowed(object));
        }
        let stored = self
            .version_store(&self.def.gvk.version)?
            .stored(object.clone())
            .await?;
        let mut served = self.version_store(version)?.served(stored).await?;
        keep_server_fields(&mut served, object);
        Ok(Cow::Owned(served))
    }

    /// A webhook's patched object at `version`, back at the request's version.
    async fn back_from_version(&self, object: Value, version: &str) -> Result<Value, ApiError> {
        if version == self.def.gvk.version {
            return Ok(object);
        }
        let stored = self.version_store(version)?.stored(object).await?;
        self.version_store(&self.def.gvk.version)?
            .served(stored)
            .await
    }

    /// The registry store of the request's resource at `version`.
    fn version_store(&self, version: &str) -> Result<&Arc<RegistryStore>, ApiError> {
        self.served
            .store(&self.def.gvk.group, version, &self.def.plural)
            .ok_or_else(|| {
                ApiError::internal(format!(
                    "{} is not served at version {version}",
                    self.def.group_resource()
                ))
            })
    }

    /// Calls `webhook` if it applies to the request; applies its patch to `object` when
    /// `mutating`.
    async fn call(
        &self,
        webhook: &Webhook,
        operation: Operation,
        object: Option<&mut Value>,
        old: Option<&Value>,
        dry_run: bool,
        mutating: bool,
    ) -> Result<Outcome, ApiError> {
        let namespace = self.rule_namespace(object.as_deref(), old);
        let attributes = Attributes {
            operation: operation.as_str(),
            group: &self.def.gvk.group,
            version: &self.def.gvk.version,
            resource: &self.def.plural,
            subresource: &self.subresource,
            namespace: &namespace,
        };
        let Some(invocation) = webhook.matching_version(&attributes, &self.equivalents) else {
            return Ok(Outcome::Skipped);
        };
        if needs_namespace(&webhook.namespace_selector) {
            let labels = self
                .namespace_labels(&namespace, object.as_deref(), old)
                .await?;
            if !webhook.namespace_matches(labels.as_ref()) {
                return Ok(Outcome::Skipped);
            }
        }
        if !webhook.object_matches(object.as_deref(), old) {
            return Ok(Outcome::Skipped);
        }
        // Sent at the version the webhook matched.
        let sent_object = match object.as_deref() {
            Some(o) => Some(self.at_version(o, &invocation.version).await?),
            None => None,
        };
        let sent_old = match old {
            Some(o) => Some(self.at_version(o, &invocation.version).await?),
            None => None,
        };
        let name = object
            .as_deref()
            .or(old)
            .and_then(|o| o["metadata"]["name"].as_str())
            .unwrap_or(&self.name)
            .to_owned();
        let body = {
            let review = self.review_request(
                &invocation.version,
                operation,
                &name,
                &namespace,
                (sent_object.as_deref(), sent_old.as_deref()),
                dry_run,
            );
            if !webhook.conditions.is_empty() {
                let null = Value::Null;
                let holds = webhook.conditions_hold(&[
                    ("object", review.object.unwrap_or(&null)),
                    ("oldObject", review.old_object.unwrap_or(&null)),
                    ("request", &review.to_json()),
                ]);
                match holds {
                    Ok(true) => {}
                    Ok(false) => return Ok(Outcome::Skipped),
                    Err(e) => {
                        return Err(ApiError::forbidden_object(
                            &self.def.group_resource(),
                            &name,
                            &format!(
                                "failed to evaluate the match conditions of admission webhook {:?}: {e}",
                                webhook.name
                            ),
                        ))
                    }
                }
            }
            review
                .review_bytes()
                .map_err(|e| ApiError::internal(format!("encoding the admission review: {e}")))?
        };
        if dry_run && webhook.side_effects == SideEffects::Unsafe {
            return Err(ApiError::bad_request(format!(
                "admission webhook {:?} does not support dry run",
                webhook.name
            )));
        }
        let verdict = match self.exchange(webhook, Bytes::from(body), mutating).await {
            Ok(verdict) => verdict,
            Err(reason) => {
                return match webhook.failure_policy {
                    FailurePolicy::Ignore => {
                        tracing::warn!(webhook = %webhook.name, configuration = %webhook.configuration, error = %reason, "failed calling webhook, failing open (failurePolicy: Ignore)");
                        Ok(Outcome::Skipped)
                    }
                    FailurePolicy::Fail => Err(ApiError::internal(format!(
                        "failed calling webhook {:?}: {reason}",
                        webhook.name
                    ))),
                };
            }
        };
        self.warnings.lock().extend(verdict.warnings);
        if !verdict.allowed {
            return Err(denial(&webhook.name, &verdict.status));
        }
        let Some(patch) = verdict.patch else {
            return Ok(Outcome::Called { changed: false });
        };
        let base = sent_object.map_or(Value::Null, Cow::into_owned);
        let Some(object) = object else {
            return Ok(Outcome::Called { changed: false });
        };
        let mut patched = setpoint_core::json_patch(base.clone(), patch).map_err(|e| {
            ApiError::internal(format!(
                "the patch of admission webhook {:?} does not apply: {e}",
                webhook.name
            ))
        })?;
        if patched == base {
            return Ok(Outcome::Called { changed: false });
        }
        if !self.scale_request() {
            patched = self.back_from_version(patched, &invocation.version).await?;
            patched["apiVersion"] = json!(self.def.gvk.api_version());
            patched = self.def.strategy.normalize(&patched).map_err(|e| {
                ApiError::internal(format!(
                    "admission webhook {:?} patched the object into one that does not decode: {e}",
                    webhook.name
                ))
            })?;
        }
        let changed = patched != *object;
        *object = patched;
        Ok(Outcome::Called { changed })
    }

    /// Sends the review to the webhook and reads its answer; the error is why the call failed
    /// (the text after `failed calling webhook "NAME": `).
    async fn exchange(
        &self,
        webhook: &Webhook,
        body: Bytes,
        mutating: bool,
    ) -> Result<super::review::Verdict, String> {
        let answer = crate::webhook::call(
            &self.state.client,
            &self.served,
            &webhook.client_config,
            webhook.timeout,
            body,
        )
        .await?;
        read_response(&answer, &self.uid, mutating)
            .map_err(|e| format!("received invalid webhook response: {e}"))
    }
}

/// Metadata a conversion through storage may drop or the request had not set yet (a create's
/// object has no `resourceVersion` or `uid`), taken as the request has it.
fn keep_server_fields(converted: &mut Value, original: &Value) {
    if let (Some(to), Some(from)) = (
        converted.get_mut("metadata").and_then(Value::as_object_mut),
        original.get("metadata").and_then(Value::as_object),
    ) {
        for field in ["resourceVersion", "uid", "creationTimestamp", "generation"] {
            match from.get(field) {
                Some(v) => {
                    to.insert(field.to_owned(), v.clone());
                }
                None => {
                    to.remove(field);
                }
            }
        }
    }
}
