//! Which resource a storage key belongs to, as an `EncryptionConfiguration` names resources
//! (group and plural): built-in kinds live under `/registry/<plural>/` (their group from the
//! registry), CustomResourceDefinitions and custom resources under `/registry/<group>/<plural>/`.
//! Keys of no resource (`/registry/compact_rev_key`, a leader's bookkeeping) belong to none and
//! are never transformed.

use std::collections::HashMap;
use std::sync::OnceLock;

/// The built-in resources' groups by the first segment of their key prefix; both Event APIs
/// share `/registry/events/`, which belongs to the core group (kube-apiserver's rule too).
fn builtin_groups() -> &'static HashMap<String, String> {
    static GROUPS: OnceLock<HashMap<String, String>> = OnceLock::new();
    GROUPS.get_or_init(|| {
        let mut groups: HashMap<String, String> = HashMap::new();
        for def in crate::registry::registered_resources() {
            let segment = def
                .key_prefix
                .trim_start_matches("/registry/")
                .trim_end_matches('/')
                .to_owned();
            let group = def.gvk.group.clone();
            groups
                .entry(segment)
                .and_modify(|existing| {
                    if group.is_empty() {
                        existing.clone_from(&group);
                    }
                })
                .or_insert(group);
        }
        groups
    })
}

/// The (group, resource) of the object at `key`, or `None` for a key of no resource.
pub(crate) fn group_resource_of(key: &[u8]) -> Option<(&str, &str)> {
    let key = std::str::from_utf8(key).ok()?;
    let rest = key.strip_prefix("/registry/")?;
    let (first, rest) = rest.split_once('/')?;
    if first.contains('.') {
        let (plural, _) = rest.split_once('/')?;
        return (!plural.is_empty()).then_some((first, plural));
    }
    let group = builtin_groups().get(first)?;
    Some((group.as_str(), first))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_should_map_to_their_group_and_resource() {
        assert_eq!(
            group_resource_of(b"/registry/secrets/default/s"),
            Some(("", "secrets"))
        );
        assert_eq!(
            group_resource_of(b"/registry/deployments/default/d"),
            Some(("apps", "deployments"))
        );
        assert_eq!(
            group_resource_of(b"/registry/events/default/e"),
            Some(("", "events"))
        );
        assert_eq!(
            group_resource_of(b"/registry/example.com/widgets/default/w"),
            Some(("example.com", "widgets"))
        );
        assert_eq!(
            group_resource_of(b"/registry/apiextensions.k8s.io/customresourcedefinitions/w"),
            Some(("apiextensions.k8s.io", "customresourcedefinitions"))
        );
        assert_eq!(group_resource_of(b"/registry/compact_rev_key"), None);
        assert_eq!(group_resource_of(b"/registry/unknown/x"), None);
        assert_eq!(group_resource_of(b"/other/secrets/x"), None);
    }
}
