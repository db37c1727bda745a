//! Server-side apply through the `scale` subresource. The applied `Scale` is merged with the
//! object's `Scale` view under the managers of the object's replica count (whoever owns
//! `spec.replicas`, or the CRD's `specReplicasPath`, owns the `Scale`'s `spec.replicas`), so
//! an apply conflicts with the replicas' other owners unless forced; the outcome is mapped back
//! onto the object: its replica count and who owns it, every other field's owners untouched.

use serde_json::Value;
use setpoint_core::fieldpath::{
    self, FieldSet, Ignore, Managed, ManagerKey, Managers, Operation, Shape, Writer,
};
use setpoint_core::ApiError;

use super::{conflict, entries, set_managed_fields, FieldManager, BEFORE_FIRST_APPLY};
use crate::registry::meta;
use crate::registry::strategy::ScaleView;

const SCALE_API_VERSION: &str = "autoscaling/v1";

fn path_of(fields: &[String]) -> Vec<String> {
    fields.iter().map(|f| format!("f:{f}")).collect()
}

impl FieldManager<'_> {
    /// Applies the `Scale` `config` to `current` (seen through `view`); returns the object to
    /// write (its replicas and `managedFields` set) and the applied `Scale`. A 409 lists the
    /// replicas' other owners unless `force`.
    pub(crate) fn apply_scale(
        &self,
        current: &Value,
        view: &dyn ScaleView,
        config: &Value,
        force: bool,
    ) -> Result<(Value, Value), ApiError> {
        if !config["metadata"]["managedFields"].is_null() {
            return Err(ApiError::bad_request(
                "metadata.managedFields must be nil in an apply configuration",
            ));
        }
        let field = view.replicas_field();
        let parent_path = path_of(&field);
        let scale_path = path_of(&["spec".to_owned(), "replicas".to_owned()]);
        let mut parent = entries::decode(current).unwrap_or_default();
        let has_replicas = field
            .iter()
            .try_fold(current, |v, f| v.get(f.as_str()))
            .is_some();
        if parent.is_empty() && has_replicas {
            let mut set = FieldSet::new();
            set.insert(&parent_path);
            parent.insert(
                ManagerKey {
                    manager: BEFORE_FIRST_APPLY.into(),
                    operation: Operation::Update,
                    subresource: String::new(),
                },
                Managed {
                    set,
                    api_version: self.def.gvk.api_version(),
                    time: Some(meta::now()),
                },
            );
        }
        // The managers as the `Scale` sees them: the owners of the replicas.
        let mut scale_managers: Managers = parent
            .iter()
            .filter(|(_, m)| m.set.contains(&parent_path))
            .map(|(k, m)| {
                let mut set = FieldSet::new();
                set.insert(&scale_path);
                let managed = Managed {
                    set,
                    api_version: SCALE_API_VERSION.to_owned(),
                    time: m.time.clone(),
                };
                (k.clone(), managed)
            })
            .collect();
        let live = view.scale_of(current);
        let shape = Shape::builtin(SCALE_API_VERSION, "Scale");
        // Only the requested replicas are anyone's.
        let ignore = Ignore::new(
            vec![vec!["f:apiVersion".to_owned()], vec!["f:kind".to_owned()]],
            vec![vec!["f:metadata".to_owned()], vec!["f:status".to_owned()]],
        );
        let writer = Writer {
            manager: &self.key,
            api_version: SCALE_API_VERSION,
            shape: &shape,
            ignore: &ignore,
        };
        let scale =
            fieldpath::managers::apply(&mut scale_managers, Some(&live), config, &writer, force)
                .map_err(|c| conflict::error(&c))?;
        // Back onto the object: the replicas belong to whoever owns them in the `Scale` now.
        for (key, managed) in &mut parent {
            if !scale_managers
                .get(key)
                .is_some_and(|m| m.set.contains(&scale_path))
            {
                managed.set.remove(&parent_path);
            }
        }
        for (key, managed) in scale_managers {
            if !managed.set.contains(&scale_path) {
                continue;
            }
            let entry = parent.entry(key).or_insert_with(|| Managed {
                set: FieldSet::new(),
                api_version: self.def.gvk.api_version(),
                time: None,
            });
            if !entry.set.contains(&parent_path) {
                entry.set.insert(&parent_path);
                entry.time = managed.time;
            }
        }
        parent.retain(|_, m| !m.set.is_empty());
        let mut next = current.clone();
        if let Some(n) = scale["spec"]["replicas"].as_i64() {
            view.set_replicas(&mut next, n);
        } else if scale["spec"]["replicas"].is_null() {
            view.set_replicas(&mut next, 0);
        }
        set_managed_fields(&mut next, parent);
        Ok((next, scale))
    }
}
