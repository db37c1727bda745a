//! Controller references read and written: which ownerReference names an object's controller,
//! the reference that makes an owner the controller of a dependent, whether one object
//! controls another, and what a claiming owner does with one candidate ([`decide`]).
//!
//! An object has at most one controller: the ownerReference with `controller: true` (the API
//! server rejects a second one). References are compared by UID, so an owner deleted and
//! re-created under the same name controls nothing its predecessor did.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::Resource;
use setpoint_core::LabelSelector;

/// The ownerReference with `controller: true` in `meta`, if any.
pub fn controller_ref(meta: &ObjectMeta) -> Option<&OwnerReference> {
    meta.owner_references
        .as_deref()?
        .iter()
        .find(|r| r.controller == Some(true))
}

/// The controller reference in `meta` if it names an object of kind `O` — same kind, same API
/// group, any version (an owner written as `apps/v1beta2` is still a `apps` ReplicaSet).
pub fn controller_ref_of_kind<O>(meta: &ObjectMeta) -> Option<&OwnerReference>
where
    O: Resource<DynamicType = ()>,
{
    let owner = controller_ref(meta)?;
    (owner.kind == O::kind(&()) && group_of(&owner.api_version) == O::group(&())).then_some(owner)
}

/// The ownerReference that makes `owner` the controller of a dependent: its apiVersion, kind,
/// name and UID, `controller: true` and `blockOwnerDeletion: true` (so a foreground deletion of
/// the owner waits for the dependent).
pub fn controller_ref_to<O>(owner: &O) -> OwnerReference
where
    O: Resource<DynamicType = ()>,
{
    let meta = owner.meta();
    OwnerReference {
        api_version: O::api_version(&()).into_owned(),
        kind: O::kind(&()).into_owned(),
        name: meta.name.clone().unwrap_or_default(),
        uid: meta.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// Whether the object with metadata `meta` is controlled by the object with metadata `owner`
/// (its controller reference carries the owner's UID). An owner without a UID controls nothing.
pub fn is_controlled_by(meta: &ObjectMeta, owner: &ObjectMeta) -> bool {
    match (controller_ref(meta), owner.uid.as_deref()) {
        (Some(reference), Some(uid)) => reference.uid == uid,
        _ => false,
    }
}

/// What a claiming owner does with one candidate dependent (see [`decide`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimDecision {
    /// Controlled by the owner and selected: the owner's.
    Keep,
    /// An orphan the owner selects: adopt it (add the owner's controller reference).
    Adopt,
    /// Controlled by the owner but no longer selected: release it (remove the reference).
    Release,
    /// Not the owner's business: another controller's, an orphan it does not select (or of
    /// another namespace, or being deleted), or a change that must wait — an owner being
    /// deleted neither adopts nor releases.
    Ignore,
}

/// What the owner with metadata `owner`, selecting with `selector`, does with the candidate
/// with metadata `object`.
pub fn decide(owner: &ObjectMeta, selector: &LabelSelector, object: &ObjectMeta) -> ClaimDecision {
    let owner_deleting = owner.deletion_timestamp.is_some();
    let selected = match &object.labels {
        Some(labels) => selector.matches(labels),
        None => selector.matches(&Default::default()),
    };
    match controller_ref(object) {
        Some(reference) if Some(&reference.uid) == owner.uid.as_ref() => {
            if selected {
                ClaimDecision::Keep
            } else if owner_deleting {
                ClaimDecision::Ignore
            } else {
                ClaimDecision::Release
            }
        }
        Some(_) => ClaimDecision::Ignore,
        None if owner_deleting || !selected || object.deletion_timestamp.is_some() => {
            ClaimDecision::Ignore
        }
        None if object.namespace != owner.namespace => ClaimDecision::Ignore,
        None => ClaimDecision::Adopt,
    }
}

/// The group of an apiVersion: `apps` of `apps/v1`, empty for `v1`.
pub(crate) fn group_of(api_version: &str) -> &str {
    match api_version.split_once('/') {
        Some((group, _version)) => group,
        None => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;

    fn owner(uid: &str) -> ObjectMeta {
        ObjectMeta {
            name: Some("web".into()),
            namespace: Some("ns".into()),
            uid: Some(uid.into()),
            ..Default::default()
        }
    }

    fn reference(uid: &str, controller: Option<bool>) -> OwnerReference {
        OwnerReference {
            api_version: "apps/v1".into(),
            kind: "ReplicaSet".into(),
            name: "x".into(),
            uid: uid.into(),
            controller,
            block_owner_deletion: Some(true),
        }
    }

    fn labelled(controller_uid: Option<&str>, app: &str) -> ObjectMeta {
        ObjectMeta {
            name: Some("child".into()),
            namespace: Some("ns".into()),
            labels: Some([("app".to_owned(), app.to_owned())].into()),
            owner_references: controller_uid.map(|uid| vec![reference(uid, Some(true))]),
            ..Default::default()
        }
    }

    fn deleting(mut meta: ObjectMeta) -> ObjectMeta {
        meta.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
        meta
    }

    #[test]
    fn controller_ref_should_pick_the_controller_among_owners() {
        let mut meta = labelled(None, "web");
        meta.owner_references = Some(vec![reference("a", None), reference("b", Some(true))]);
        assert_eq!(controller_ref(&meta).map(|r| r.uid.as_str()), Some("b"));
        meta.owner_references = Some(vec![reference("a", Some(false))]);
        assert_eq!(controller_ref(&meta), None);
        assert_eq!(controller_ref(&ObjectMeta::default()), None);
    }

    #[test]
    fn controller_ref_of_kind_should_match_kind_and_group_in_any_version() {
        let mut meta = labelled(Some("u1"), "web");
        assert!(controller_ref_of_kind::<ReplicaSet>(&meta).is_some());
        assert!(controller_ref_of_kind::<Deployment>(&meta).is_none());
        meta.owner_references = Some(vec![OwnerReference {
            api_version: "apps/v1beta2".into(),
            ..reference("u1", Some(true))
        }]);
        assert!(controller_ref_of_kind::<ReplicaSet>(&meta).is_some());
        meta.owner_references = Some(vec![OwnerReference {
            api_version: "example.com/v1".into(),
            ..reference("u1", Some(true))
        }]);
        assert!(controller_ref_of_kind::<ReplicaSet>(&meta).is_none());
    }

    #[test]
    fn controller_ref_to_should_name_the_owner_as_blocking_controller() {
        let d = Deployment {
            metadata: owner("u1"),
            ..Default::default()
        };
        let r = controller_ref_to(&d);
        assert_eq!(r.api_version, "apps/v1");
        assert_eq!(r.kind, "Deployment");
        assert_eq!(r.name, "web");
        assert_eq!(r.uid, "u1");
        assert_eq!(r.controller, Some(true));
        assert_eq!(r.block_owner_deletion, Some(true));
    }

    #[test]
    fn is_controlled_by_should_compare_uids_of_the_controller_only() {
        assert!(is_controlled_by(&labelled(Some("u1"), "web"), &owner("u1")));
        assert!(!is_controlled_by(
            &labelled(Some("u2"), "web"),
            &owner("u1")
        ));
        assert!(!is_controlled_by(&labelled(None, "web"), &owner("u1")));
        let mut not_controller = labelled(None, "web");
        not_controller.owner_references = Some(vec![reference("u1", None)]);
        assert!(!is_controlled_by(&not_controller, &owner("u1")));
        assert!(!is_controlled_by(
            &labelled(Some(""), "web"),
            &ObjectMeta::default()
        ));
    }

    #[test]
    fn decide_should_keep_adopt_release_or_ignore() {
        let s = LabelSelector::parse("app=web").expect("valid");
        let o = owner("u1");
        assert_eq!(
            decide(&o, &s, &labelled(Some("u1"), "web")),
            ClaimDecision::Keep
        );
        assert_eq!(
            decide(&o, &s, &labelled(Some("u1"), "db")),
            ClaimDecision::Release
        );
        assert_eq!(decide(&o, &s, &labelled(None, "web")), ClaimDecision::Adopt);
        assert_eq!(decide(&o, &s, &labelled(None, "db")), ClaimDecision::Ignore);
        assert_eq!(
            decide(&o, &s, &labelled(Some("u2"), "web")),
            ClaimDecision::Ignore,
            "another controller's object is never taken"
        );
    }

    #[test]
    fn a_deleting_owner_should_neither_adopt_nor_release() {
        let s = LabelSelector::parse("app=web").expect("valid");
        let o = deleting(owner("u1"));
        assert_eq!(
            decide(&o, &s, &labelled(None, "web")),
            ClaimDecision::Ignore
        );
        assert_eq!(
            decide(&o, &s, &labelled(Some("u1"), "db")),
            ClaimDecision::Ignore
        );
        assert_eq!(
            decide(&o, &s, &labelled(Some("u1"), "web")),
            ClaimDecision::Keep
        );
    }

    #[test]
    fn terminating_or_foreign_orphans_should_not_be_adopted() {
        let s = LabelSelector::parse("app=web").expect("valid");
        let o = owner("u1");
        assert_eq!(
            decide(&o, &s, &deleting(labelled(None, "web"))),
            ClaimDecision::Ignore
        );
        let mut elsewhere = labelled(None, "web");
        elsewhere.namespace = Some("other".into());
        assert_eq!(decide(&o, &s, &elsewhere), ClaimDecision::Ignore);
    }

    #[test]
    fn group_of_should_split_the_api_version() {
        assert_eq!(group_of("apps/v1"), "apps");
        assert_eq!(group_of("v1"), "");
    }
}
