//! Field management: the `metadata.managedFields` of every object written through the API,
//! and server-side apply.
//!
//! Every create, update and patch is recorded as an `Update` by its manager (the request's
//! `fieldManager`, else the first part of its user agent): the manager comes to own the fields
//! it set or changed. An apply patch (`application/apply-patch+yaml`) is an `Apply`: merged
//! into the live object by the kind's list types and keys, owning exactly the applied fields,
//! conflicting with other owners (409, one cause per field) unless forced, and removing the
//! fields the manager stopped applying that nobody else owns. The rules are in
//! `setpoint_core::fieldpath`; this module knows the kinds (their schema, their status
//! subresource, the metadata nobody owns) and the wire form of the entries.
//!
//! An apply through `scale` (`scale.rs`) applies a `Scale` to the object's replica count.
//!
//! As in kube-apiserver, field management runs before the kind's own preparation: fields the
//! strategy then sets or resets (status on the main resource, generation) are not attributed,
//! and fields mutating admission adds are nobody's.

mod conflict;
mod entries;
mod scale;
mod versions;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::{json, Value};
use setpoint_core::fieldpath::{self, Ignore, ManagerKey, Managers, Operation, Shape, Writer};
use setpoint_core::{ApiError, Cause};

use super::meta;
use super::store::Scope;
use super::ResourceDef;

/// The longest manager name kube-apiserver accepts.
const MAX_MANAGER_LENGTH: usize = 128;
/// The manager that owns every field of an object that had no managed fields when it was
/// first applied to.
const BEFORE_FIRST_APPLY: &str = "before-first-apply";

/// Metadata fields nobody owns (the server sets them, or they name the object).
const UNOWNED_METADATA: &[&str] = &[
    "name",
    "namespace",
    "creationTimestamp",
    "selfLink",
    "uid",
    "clusterName",
    "generation",
    "managedFields",
    "resourceVersion",
];

/// Records the writes of one request's manager on one resource.
pub(crate) struct FieldManager<'a> {
    def: &'a ResourceDef,
    key: ManagerKey,
    scope: Scope,
    /// The resource's other served versions (`versions.rs`).
    versions: Vec<Arc<ResourceDef>>,
}

impl<'a> FieldManager<'a> {
    /// The manager `manager` writing through `scope` (the main resource or `status`) with
    /// `operation`.
    pub(crate) fn new(
        def: &'a ResourceDef,
        manager: String,
        operation: Operation,
        scope: Scope,
    ) -> FieldManager<'a> {
        let subresource = match scope {
            Scope::Status => "status",
            Scope::Main | Scope::Full => "",
        };
        FieldManager {
            def,
            key: ManagerKey {
                manager,
                operation,
                subresource: subresource.to_owned(),
            },
            scope,
            versions: Vec::new(),
        }
    }

    /// The same manager, comparing writes also at the resource's other served `versions`
    /// for the managers that wrote at them.
    pub(crate) fn across(mut self, versions: Vec<Arc<ResourceDef>>) -> FieldManager<'a> {
        self.versions = versions;
        self
    }

    /// The same manager writing through another subresource of the main resource (`scale`:
    /// what it changes is the object's, the entry says which door it came through).
    pub(crate) fn on_subresource(mut self, subresource: &str) -> FieldManager<'a> {
        self.key.subresource = subresource.to_owned();
        self
    }

    /// Records a non-apply write that turns `current` (absent for a create) into `new`, and
    /// sets `new`'s `managedFields`. Managed fields the client sent are kept as its base (a
    /// client may rewrite them; `[{}]` clears them); none, or ones that do not decode, keep
    /// the live object's.
    pub(crate) fn track(&self, current: Option<&Value>, new: &mut Value) {
        if entries::is_reset(new) {
            meta::metadata(new).remove("managedFields");
            return;
        }
        let mut managers = entries::decode(new)
            .or_else(|| current.and_then(entries::decode))
            .unwrap_or_default();
        let old = match current {
            Some(current) => without_managed_fields(current),
            None => self.zero(new),
        };
        let mut after = without_managed_fields(new);
        // Defaults are part of what the writer sent, as kube-apiserver decodes them in.
        self.def.strategy.apply_defaults(&mut after);
        let (shape, api_version) = (shape_of(self.def), self.def.gvk.api_version());
        let ignore = self.ignore(&[&old, &after]);
        let writer = Writer {
            manager: &self.key,
            api_version: &api_version,
            shape: &shape,
            ignore: &ignore,
        };
        let elsewhere = self.changes_at_other_versions(&managers, Some(&old), &after, &ignore);
        fieldpath::managers::update(&mut managers, Some(&old), &after, &writer);
        self.take_from_other_versions(&mut managers, &elsewhere);
        set_managed_fields(new, managers);
    }

    /// Applies `config` to `current` (absent: the apply creates the object) and returns the
    /// object to write, its `managedFields` set; a 409 lists the conflicts unless `force`.
    pub(crate) fn apply(
        &self,
        current: Option<&Value>,
        config: &Value,
        force: bool,
    ) -> Result<Value, ApiError> {
        if !config["metadata"]["managedFields"].is_null() {
            return Err(ApiError::bad_request(
                "metadata.managedFields must be nil in an apply configuration",
            ));
        }
        let live = current.map(without_managed_fields);
        let shape = shape_of(self.def);
        let mut managers = current.and_then(entries::decode).unwrap_or_default();
        let ignore = self.ignore(&[live.as_ref().unwrap_or(&Value::Null), config]);
        if let (Some(live), true) = (&live, managers.is_empty()) {
            // An object nobody has managed yet: its fields are all someone's, so the first
            // apply conflicts where it would change them.
            let mut set = fieldpath::walk::field_set(live, &shape);
            ignore.filter(&mut set);
            if !set.is_empty() {
                managers.insert(
                    ManagerKey {
                        manager: BEFORE_FIRST_APPLY.into(),
                        operation: Operation::Update,
                        subresource: String::new(),
                    },
                    fieldpath::Managed {
                        set,
                        api_version: self.def.gvk.api_version(),
                        time: Some(meta::now()),
                    },
                );
            }
        }
        let api_version = self.def.gvk.api_version();
        let writer = Writer {
            manager: &self.key,
            api_version: &api_version,
            shape: &shape,
            ignore: &ignore,
        };
        let mut new =
            fieldpath::managers::apply(&mut managers, live.as_ref(), config, &writer, force)
                .map_err(|c| conflict::error(&c))?;
        let elsewhere = self.changes_at_other_versions(&managers, live.as_ref(), &new, &ignore);
        if !force {
            let conflicts = self.conflicts_at_other_versions(&managers, &elsewhere);
            if !conflicts.is_empty() {
                return Err(conflict::error(&conflicts));
            }
        }
        self.take_from_other_versions(&mut managers, &elsewhere);
        set_managed_fields(&mut new, managers);
        Ok(new)
    }

    /// What nobody owns: the server's metadata, and the part of the object this scope does
    /// not write (status through the main resource of a kind with a status subresource;
    /// everything but status through `status`).
    fn ignore(&self, objects: &[&Value]) -> Ignore {
        let mut exact = vec![
            vec!["f:apiVersion".to_owned()],
            vec!["f:kind".to_owned()],
            vec!["f:metadata".to_owned()],
        ];
        exact.extend(
            UNOWNED_METADATA
                .iter()
                .map(|f| vec!["f:metadata".to_owned(), format!("f:{f}")]),
        );
        let subtrees = match self.scope {
            Scope::Main if self.def.strategy.has_status() => vec![vec!["f:status".to_owned()]],
            Scope::Main | Scope::Full => Vec::new(),
            Scope::Status => {
                let mut fields: Vec<String> = objects
                    .iter()
                    .filter_map(|o| o.as_object())
                    .flat_map(|o| o.keys().cloned())
                    .filter(|k| !matches!(k.as_str(), "status" | "metadata"))
                    .collect();
                fields.sort();
                fields.dedup();
                fields.into_iter().map(|f| vec![format!("f:{f}")]).collect()
            }
        };
        Ignore::new(exact, subtrees)
    }

    /// The empty object a create starts from: what an empty typed object of a built-in kind
    /// holds (its `spec` and `status` structs, a pod template's metadata and spec), so that
    /// only fields below them count as added wholesale; nothing for a custom resource.
    fn zero(&self, new: &Value) -> Value {
        if !self.def.strategy.accepts_strategic_merge() {
            return json!({});
        }
        let mut zero = json!({});
        for field in ["spec", "status"] {
            if new[field].is_object() {
                zero[field] = json!({});
            }
        }
        if new["spec"]["template"].is_object() {
            zero["spec"]["template"] = json!({"metadata": {}, "spec": {}});
        }
        if new["spec"]["strategy"].is_object() {
            zero["spec"]["strategy"] = json!({});
        }
        zero
    }
}

/// The manager of a non-apply write: `fieldManager`, else the first part of the user agent
/// (`kubectl/v1.32.0 (linux/amd64) …` → `kubectl`), as kube-apiserver names it.
pub(crate) fn manager_name(field_manager: Option<&str>, user_agent: Option<&str>) -> String {
    if let Some(m) = field_manager.filter(|m| !m.is_empty()) {
        return m.to_owned();
    }
    let agent = user_agent.unwrap_or_default();
    let prefix = agent.split('/').next().unwrap_or_default();
    let name: String = prefix.chars().take(MAX_MANAGER_LENGTH).collect();
    if name.is_empty() {
        "unknown".to_owned()
    } else {
        name
    }
}

/// The causes a `fieldManager` value is refused for (too long, unprintable).
pub(crate) fn field_manager_causes(manager: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    if manager.len() > MAX_MANAGER_LENGTH {
        causes.push(Cause::new(
            "FieldValueTooLong",
            "fieldManager",
            format!("fieldManager: Too long: may not be more than {MAX_MANAGER_LENGTH} bytes"),
        ));
    }
    if manager.chars().any(char::is_control) {
        causes.push(Cause::new(
            "FieldValueInvalid",
            "fieldManager",
            format!(
                "fieldManager: Invalid value: {manager:?}: must only contain printable characters"
            ),
        ));
    }
    causes
}

/// Built-in kinds' shapes by `(apiVersion, kind)`.
type ShapeCache = HashMap<(String, String), Arc<Shape>>;

/// The schema shape of a resource's objects (cached for built-in kinds).
fn shape_of(def: &ResourceDef) -> Arc<Shape> {
    if !def.strategy.accepts_strategic_merge() {
        let schema = def
            .strategy
            .openapi_schema()
            .cloned()
            .unwrap_or(Value::Null);
        return Arc::new(Shape::from_openapi(&schema));
    }
    static BUILTIN: OnceLock<Mutex<ShapeCache>> = OnceLock::new();
    let api_version = def.gvk.api_version();
    let mut cache = BUILTIN
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    cache
        .entry((api_version.clone(), def.gvk.kind.clone()))
        .or_insert_with(|| Arc::new(Shape::builtin(&api_version, &def.gvk.kind)))
        .clone()
}

fn without_managed_fields(object: &Value) -> Value {
    let mut out = object.clone();
    if let Some(meta) = out.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
    }
    out
}

fn set_managed_fields(object: &mut Value, managers: Managers) {
    let meta = meta::metadata(object);
    if managers.is_empty() {
        meta.remove("managedFields");
    } else {
        meta.insert(
            "managedFields".into(),
            entries::encode(managers, &meta::now()),
        );
    }
}
