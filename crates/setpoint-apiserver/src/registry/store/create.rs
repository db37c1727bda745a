//! Create: server-set metadata (uid, creation time, generation), the kind's `prepare_create`
//! and `before_create` (a service's cluster IP), a name from `generateName` (retried when
//! taken), name and object validation, the namespace check, then a create-if-absent.
//! Mutating admission runs after the defaults, validating admission after validation.

use bytes::Bytes;
use serde_json::{json, Value};
use setpoint_core::{ApiError, Cause};
use setpoint_store::StoreError;

use super::{store_error, Operation, RegistryStore};
use crate::registry::meta::{self, meta_str};
use crate::registry::strategy::validate_name;

impl RegistryStore {
    /// Creates `object` (already typed) in `namespace`: server-set metadata, defaults, validation,
    /// namespace checks, then a create-if-absent in the store. Returns the stored object.
    pub(crate) async fn create(
        &self,
        namespace: Option<&str>,
        mut object: Value,
        dry_run: bool,
    ) -> Result<Value, ApiError> {
        let def = &*self.def;
        let body_ns = meta_str(&object, "namespace").map(str::to_owned);
        {
            let meta = meta::metadata(&mut object);
            if def.namespaced {
                match (namespace, body_ns.as_deref()) {
                (Some(url), Some(body)) if url != body => {
                    return Err(ApiError::bad_request(
                        "the namespace of the provided object does not match the namespace sent on the request",
                    ))
                }
                (Some(url), _) => {
                    meta.insert("namespace".into(), json!(url));
                }
                (None, _) => return Err(ApiError::bad_request("a namespace is required to create a namespaced object")),
            }
            } else {
                meta.remove("namespace");
            }
            for field in [
                "uid",
                "resourceVersion",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "selfLink",
            ] {
                meta.remove(field);
            }
            meta.insert("uid".into(), json!(meta::new_uid()));
            meta.insert("creationTimestamp".into(), json!(meta::now()));
            if def.strategy.has_generation() {
                meta.insert("generation".into(), json!(1));
            } else {
                meta.remove("generation");
            }
        }
        def.strategy.prepare_create(&mut object);
        // Admission: mutating webhooks see the defaulted object; what they change is prepared
        // again, as kube-apiserver prepares an object after admission.
        if self
            .admit_mutation(Operation::Create, Some(&mut object), None, dry_run)
            .await?
        {
            def.strategy.prepare_create(&mut object);
        }
        def.strategy.before_create(self, &mut object).await?;
        let generate = meta_str(&object, "generateName").map(str::to_owned);
        let explicit = meta_str(&object, "name")
            .filter(|n| !n.is_empty())
            .map(str::to_owned);
        if explicit.is_none() && generate.is_none() {
            return Err(def.invalid(
                "",
                vec![Cause::new(
                    "FieldValueRequired",
                    "metadata.name",
                    "metadata.name: Required value: name or generateName is required",
                )],
            ));
        }
        if let Some(ns) = namespace {
            self.check_namespace(ns, explicit.as_deref().unwrap_or(""))
                .await?;
        }
        for attempt in 0..8 {
            let name = match (&explicit, &generate) {
                (Some(n), _) => n.clone(),
                (None, Some(g)) => meta::generate_name(g),
                (None, None) => unreachable!("checked above"),
            };
            meta::metadata(&mut object).insert("name".into(), json!(name));
            let mut causes: Vec<Cause> = validate_name(&name, def.strategy.name_rule())
                .into_iter()
                .map(|p| Cause::invalid("metadata.name", &json!(name), &p))
                .collect();
            causes.extend(def.strategy.validate(&object, None).await);
            if !causes.is_empty() {
                return Err(def.invalid(&name, causes));
            }
            self.admit_validation(Operation::Create, Some(&object), None, dry_run)
                .await?;
            if dry_run {
                return Ok(object);
            }
            let key = def.key(namespace, &name);
            let mut stored = self.stored(object.clone()).await?;
            let bytes = super::convert::storage_bytes(&mut stored);
            match self.store.create(Bytes::from(key), bytes).await {
                Ok(kv) => {
                    if def.strategy.conversion().is_some() {
                        // Answered as kube-apiserver answers: the stored object, converted back.
                        object = self.served(stored).await?;
                    }
                    meta::metadata(&mut object)
                        .insert("resourceVersion".into(), json!(kv.mod_revision.to_string()));
                    return Ok(object);
                }
                Err(StoreError::AlreadyExists { .. }) if explicit.is_none() && attempt < 7 => {
                    continue
                }
                Err(e) => return Err(self.error_for(&name, e)),
            }
        }
        unreachable!("the loop returns")
    }

    /// New objects need an existing namespace that is not being deleted.
    async fn check_namespace(&self, namespace: &str, name: &str) -> Result<(), ApiError> {
        let def = &*self.def;
        let key = format!("/registry/namespaces/{namespace}");
        let kv = self
            .store
            .get(key.as_bytes())
            .await
            .map_err(store_error)?
            .ok_or_else(|| {
                ApiError::not_found(
                    &setpoint_core::GroupResource::new("", "namespaces"),
                    namespace,
                )
            })?;
        let ns: Value = serde_json::from_slice(&kv.value).unwrap_or(Value::Null);
        if !ns["metadata"]["deletionTimestamp"].is_null() {
            let mut e = ApiError::forbidden(format!(
            "{} {name:?} is forbidden: unable to create new content in namespace {namespace} because it is being terminated",
            def.group_resource()
        ));
            e.details = Some(Box::new(setpoint_core::Details {
                name: name.to_owned(),
                group: def.gvk.group.clone(),
                kind: def.plural.clone(),
                causes: vec![Cause::new(
                    "NamespaceTerminating",
                    "metadata.namespace",
                    format!("namespace {namespace} is being terminated"),
                )],
                ..Default::default()
            }));
            return Err(e);
        }
        Ok(())
    }
}
