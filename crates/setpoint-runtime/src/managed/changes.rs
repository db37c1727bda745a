//! [`changes`]: the predicate a managed-resource loop's controller runs with — a reconcile for
//! every change the loop must act on, none for status-only writes (its own among them, which
//! would otherwise retrigger it after every reconcile).

use std::collections::BTreeMap;

use crate::managed::{
    Managed, EXTERNAL_CREATE_FAILED, EXTERNAL_CREATE_PENDING, EXTERNAL_CREATE_SUCCEEDED,
};
use crate::Predicate;

/// Passes adds, and updates that change the generation (the spec), labels, annotations (but
/// not the loop's create bookkeeping: `crossplane.io/external-create-*`), finalizers or the
/// deletion timestamp. Status-only writes do not pass; the poll interval brings the next
/// observation.
pub fn changes<M: Managed>() -> Predicate<M> {
    Predicate::new(|old: Option<&M>, new: &M| {
        let Some(old) = old else {
            return true;
        };
        let (old, new) = (old.meta(), new.meta());
        let empty = BTreeMap::new();
        old.generation != new.generation
            || old.labels.as_ref().unwrap_or(&empty) != new.labels.as_ref().unwrap_or(&empty)
            || annotations_changed(
                old.annotations.as_ref().unwrap_or(&empty),
                new.annotations.as_ref().unwrap_or(&empty),
            )
            || old.finalizers.as_deref().unwrap_or_default()
                != new.finalizers.as_deref().unwrap_or_default()
            || old.deletion_timestamp != new.deletion_timestamp
    })
}

/// Whether the annotations changed in a way the loop must act on. The loop's own create
/// bookkeeping (`crossplane.io/external-create-*`) being set does not count: a failed create
/// records its outcome there, and reacting to that write would retry the create at once, again
/// and again, instead of after the key's back-off. One being removed does (a person clearing a
/// create whose outcome is unknown, to let the loop create again).
fn annotations_changed(old: &BTreeMap<String, String>, new: &BTreeMap<String, String>) -> bool {
    const BOOKKEEPING: [&str; 3] = [
        EXTERNAL_CREATE_PENDING,
        EXTERNAL_CREATE_SUCCEEDED,
        EXTERNAL_CREATE_FAILED,
    ];
    fn theirs(annotations: &BTreeMap<String, String>) -> impl Iterator<Item = (&String, &String)> {
        annotations
            .iter()
            .filter(|(key, _)| !BOOKKEEPING.contains(&key.as_str()))
    }
    !theirs(old).eq(theirs(new))
        || BOOKKEEPING
            .iter()
            .any(|key| old.contains_key(*key) && !new.contains_key(*key))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Service, ServiceStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn service() -> Service {
        let mut s = Service::default();
        s.metadata.generation = Some(1);
        s
    }

    #[test]
    fn changes_should_pass_metadata_and_spec_changes_but_not_status() {
        let p = changes::<Service>();
        let old = service();
        assert!(p.passes(None, &old), "adds pass");

        let mut status_only = old.clone();
        status_only.status = Some(ServiceStatus::default());
        status_only.metadata.resource_version = Some("9".into());
        assert!(!p.passes(Some(&old), &status_only));

        let mut empty_labels = old.clone();
        empty_labels.metadata.labels = Some(BTreeMap::new());
        assert!(!p.passes(Some(&old), &empty_labels), "none equals empty");

        let mut spec = old.clone();
        spec.metadata.generation = Some(2);
        let mut labels = old.clone();
        labels.metadata.labels = Some([("a".to_owned(), "b".to_owned())].into());
        let mut annotations = old.clone();
        annotations.metadata.annotations = Some([("a".to_owned(), "b".to_owned())].into());
        let mut finalizers = old.clone();
        finalizers.metadata.finalizers = Some(vec!["f".to_owned()]);
        let mut deleted = old.clone();
        deleted.metadata.deletion_timestamp =
            Some(Time("2026-01-01T00:00:00Z".parse().expect("time")));
        let mut bookkeeping = old.clone();
        bookkeeping.metadata.annotations = Some(
            [(
                EXTERNAL_CREATE_FAILED.to_owned(),
                "2026-01-01T00:00:00Z".to_owned(),
            )]
            .into(),
        );
        assert!(
            !p.passes(Some(&old), &bookkeeping),
            "a create's recorded outcome does not retrigger the loop"
        );
        assert!(
            p.passes(Some(&bookkeeping), &old),
            "a person clearing the bookkeeping does"
        );
        for (what, new) in [
            ("spec", spec),
            ("labels", labels),
            ("annotations", annotations),
            ("finalizers", finalizers),
            ("deletion", deleted),
        ] {
            assert!(p.passes(Some(&old), &new), "{what} passes");
        }
    }
}
