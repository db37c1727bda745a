//! From built manifests to what a Sync applies: each object's namespace settled
//! (`targetNamespace` for namespaced kinds, else the object's own, else the Sync's; none for
//! cluster-scoped kinds — scope from the CRDs of the same build, then discovery, then the
//! built-in list), the ownership labels added, and the `ignoreDifferences` fields removed.

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::discovery::Discovery;
use crate::kinds::{IgnoreDifference, InventoryEntry, Sync, SYNC_NAMESPACE_LABEL, SYNC_NAME_LABEL};
use crate::manifests::{
    check_unique, is_cluster_scoped_builtin, set_namespace, split_api_version, BuildError, ObjectId,
};

/// One object a Sync applies.
#[derive(Clone, Debug)]
pub(crate) struct Desired {
    /// Who it is (namespace settled).
    pub(crate) id: ObjectId,
    /// The version it is written in.
    pub(crate) version: String,
    /// The object to apply.
    pub(crate) object: Value,
}

impl Desired {
    /// Its inventory entry.
    pub(crate) fn inventory_entry(&self) -> InventoryEntry {
        InventoryEntry {
            id: self.id.inventory_id(),
            v: self.version.clone(),
        }
    }
}

/// Settles namespaces, labels and ignored fields of `objects` for `sync`.
pub(crate) async fn prepare(
    sync: &Sync,
    objects: Vec<Value>,
    client: &kube::Client,
    discovery: &Discovery,
) -> Result<Vec<Desired>, BuildError> {
    let sync_namespace = sync.metadata.namespace.clone().unwrap_or_default();
    let sync_name = sync.metadata.name.clone().unwrap_or_default();
    let crd_scopes = crd_scopes(&objects);
    let mut scopes: HashMap<(String, String, String), bool> = HashMap::new();
    let mut desired = Vec::with_capacity(objects.len());
    for mut object in objects {
        let Some(id) = ObjectId::of(&object) else {
            continue;
        };
        let api_version = object
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let (group, version) = split_api_version(&api_version);
        let (group, version) = (group.to_owned(), version.to_owned());
        let key = (group.clone(), version.clone(), id.kind.clone());
        let namespaced = match scopes.get(&key) {
            Some(n) => *n,
            None => {
                let n = match crd_scopes.get(&(group.clone(), id.kind.clone())) {
                    Some(n) => *n,
                    None => match discovery.resolve(client, &group, &version, &id.kind).await {
                        Ok(served) => served.namespaced,
                        Err(_) => !is_cluster_scoped_builtin(&group, &id.kind),
                    },
                };
                scopes.insert(key, n);
                n
            }
        };
        if namespaced {
            let namespace = match (&sync.spec.target_namespace, id.namespace.is_empty()) {
                (Some(target), _) if !target.is_empty() => target.clone(),
                (_, true) => sync_namespace.clone(),
                (_, false) => id.namespace.clone(),
            };
            set_namespace(&mut object, &namespace);
        } else if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("namespace");
        }
        label(&mut object, &sync_name, &sync_namespace);
        let Some(id) = ObjectId::of(&object) else {
            continue;
        };
        for ignore in &sync.spec.ignore_differences {
            if ignores(ignore, &id) {
                for pointer in &ignore.json_pointers {
                    remove_pointer(&mut object, pointer);
                }
            }
        }
        desired.push(Desired {
            id,
            version,
            object,
        });
    }
    let objects: Vec<Value> = desired.iter().map(|d| d.object.clone()).collect();
    check_unique(&objects)?;
    Ok(desired)
}

/// The scope (namespaced or not) of the kinds the CRDs among `objects` define.
fn crd_scopes(objects: &[Value]) -> HashMap<(String, String), bool> {
    objects
        .iter()
        .filter(|o| ObjectId::of(o).is_some_and(|id| id.is_crd()))
        .filter_map(|o| {
            let group = o.pointer("/spec/group")?.as_str()?;
            let kind = o.pointer("/spec/names/kind")?.as_str()?;
            let scope = o.pointer("/spec/scope").and_then(Value::as_str);
            Some((
                (group.to_owned(), kind.to_owned()),
                scope != Some("Cluster"),
            ))
        })
        .collect()
}

/// Adds the ownership labels.
fn label(object: &mut Value, name: &str, namespace: &str) {
    let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let labels = meta
        .entry("labels")
        .or_insert_with(|| Value::Object(Map::new()));
    if !labels.is_object() {
        *labels = Value::Object(Map::new());
    }
    if let Some(labels) = labels.as_object_mut() {
        labels.insert(SYNC_NAME_LABEL.to_owned(), Value::String(name.to_owned()));
        labels.insert(
            SYNC_NAMESPACE_LABEL.to_owned(),
            Value::String(namespace.to_owned()),
        );
    }
}

/// Whether an `ignoreDifferences` entry applies to an object.
pub(crate) fn ignores(ignore: &IgnoreDifference, id: &ObjectId) -> bool {
    ignore.group.as_deref().unwrap_or("") == id.group
        && ignore.kind == id.kind
        && ignore.name.as_ref().is_none_or(|n| *n == id.name)
        && ignore.namespace.as_ref().is_none_or(|n| *n == id.namespace)
}

/// Removes the value at a JSON pointer (RFC 6901), if there is one.
pub(crate) fn remove_pointer(object: &mut Value, pointer: &str) {
    let Some(rest) = pointer.strip_prefix('/') else {
        return;
    };
    let tokens: Vec<String> = rest
        .split('/')
        .map(|t| t.replace("~1", "/").replace("~0", "~"))
        .collect();
    let Some((last, parents)) = tokens.split_last() else {
        return;
    };
    let mut at = object;
    for token in parents {
        let next = match at {
            Value::Object(map) => map.get_mut(token),
            Value::Array(items) => token.parse::<usize>().ok().and_then(|i| items.get_mut(i)),
            _ => None,
        };
        match next {
            Some(next) => at = next,
            None => return,
        }
    }
    match at {
        Value::Object(map) => {
            map.remove(last);
        }
        Value::Array(items) => {
            if let Some(i) = last.parse::<usize>().ok().filter(|i| *i < items.len()) {
                items.remove(i);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pointers_should_remove_fields_and_list_items() {
        let mut object = json!({"spec": {"replicas": 3, "a/b": 1, "list": [1, 2, 3]}});
        remove_pointer(&mut object, "/spec/replicas");
        remove_pointer(&mut object, "/spec/a~1b");
        remove_pointer(&mut object, "/spec/list/1");
        remove_pointer(&mut object, "/spec/missing/deeper");
        remove_pointer(&mut object, "no-slash");
        assert_eq!(object, json!({"spec": {"list": [1, 3]}}));
    }

    #[test]
    fn ignore_entries_should_match_group_kind_and_optional_name() {
        let id = ObjectId {
            group: "apps".to_owned(),
            kind: "Deployment".to_owned(),
            namespace: "prod".to_owned(),
            name: "web".to_owned(),
        };
        let mut ignore = IgnoreDifference {
            group: Some("apps".to_owned()),
            kind: "Deployment".to_owned(),
            ..IgnoreDifference::default()
        };
        assert!(ignores(&ignore, &id));
        ignore.name = Some("other".to_owned());
        assert!(!ignores(&ignore, &id));
        ignore.name = None;
        ignore.group = None;
        assert!(!ignores(&ignore, &id));
    }
}
