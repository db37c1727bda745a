//! [`Predicate`]: which changes of the main resource trigger a reconcile.
//!
//! A predicate sees `(old, new)`: `(None, object)` for an object added to the cache (including
//! the initial list) and `(Some(old), new)` for an update. Deletions always trigger (the
//! reconcile then finds the object gone and is skipped), and so do resyncs the controller asked
//! for with [`resync`](super::Controller::resync) (or the main informer options' `resync`): a
//! resync exists to reconcile everything, so filtering it away would make it a no-op. Without a
//! resync, an unchanged object re-delivered by a relist is filtered like any update.
//! Predicates filter triggers only; they never shrink the cache (scope the informer with
//! [`for_options`](super::Controller::for_options) for that).
//!
//! Several predicates on one controller must all pass; combine them with [`Predicate::or`],
//! [`Predicate::and`] and [`Predicate::not`] for anything else.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use kube::Resource;
use setpoint_core::LabelSelector;

type Test<K> = dyn Fn(Option<&K>, &K) -> bool + Send + Sync;

/// A filter on adds and updates of the main resource. Cheap to clone.
///
/// ```
/// use k8s_openapi::api::apps::v1::Deployment;
/// use setpoint_runtime::Predicate;
///
/// // Reconcile on spec changes and on label changes, not on status-only writes:
/// let p = Predicate::<Deployment>::generation_changed().or(Predicate::labels_changed());
/// # let _ = p;
/// ```
pub struct Predicate<K> {
    test: Arc<Test<K>>,
}

impl<K> Clone for Predicate<K> {
    fn clone(&self) -> Self {
        Self {
            test: Arc::clone(&self.test),
        }
    }
}

impl<K> fmt::Debug for Predicate<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Predicate").finish_non_exhaustive()
    }
}

impl<K: Resource + 'static> Predicate<K> {
    /// A predicate from a function of `(old, new)`; `old` is `None` for an add.
    pub fn new(test: impl Fn(Option<&K>, &K) -> bool + Send + Sync + 'static) -> Predicate<K> {
        Predicate {
            test: Arc::new(test),
        }
    }

    /// Adds pass; updates pass iff `metadata.generation` changed — that is, the spec changed
    /// (for kinds whose server bumps it: most built-ins with a spec and custom resources with
    /// a status subresource). Status-only and most metadata-only writes are filtered out.
    /// Kinds without a generation (ConfigMaps, Secrets) never pass an update.
    pub fn generation_changed() -> Predicate<K> {
        Predicate::new(|old: Option<&K>, new: &K| match old {
            None => true,
            Some(old) => old.meta().generation != new.meta().generation,
        })
    }

    /// Adds pass; updates pass iff the labels changed.
    pub fn labels_changed() -> Predicate<K> {
        Predicate::new(|old: Option<&K>, new: &K| match old {
            None => true,
            Some(old) => labels(old) != labels(new),
        })
    }

    /// Adds pass; updates pass iff the annotations changed.
    pub fn annotations_changed() -> Predicate<K> {
        Predicate::new(|old: Option<&K>, new: &K| match old {
            None => true,
            Some(old) => annotations(old) != annotations(new),
        })
    }

    /// Passes iff the new state's labels match `selector` (an object updated out of the
    /// selection does not trigger).
    pub fn label_selector(selector: LabelSelector) -> Predicate<K> {
        Predicate::new(move |_: Option<&K>, new: &K| selector.matches(labels(new)))
    }

    /// Passes iff both pass.
    pub fn and(self, other: Predicate<K>) -> Predicate<K> {
        Predicate::new(move |old: Option<&K>, new: &K| {
            self.passes(old, new) && other.passes(old, new)
        })
    }

    /// Passes iff either passes.
    pub fn or(self, other: Predicate<K>) -> Predicate<K> {
        Predicate::new(move |old: Option<&K>, new: &K| {
            self.passes(old, new) || other.passes(old, new)
        })
    }

    /// Passes iff this one does not.
    #[allow(
        clippy::should_implement_trait,
        reason = "a builder-style combinator beside and/or; `!predicate` would read worse"
    )]
    pub fn not(self) -> Predicate<K> {
        Predicate::new(move |old: Option<&K>, new: &K| !self.passes(old, new))
    }

    /// Whether a change from `old` (`None` for an add) to `new` passes.
    pub fn passes(&self, old: Option<&K>, new: &K) -> bool {
        (self.test)(old, new)
    }
}

/// The object's labels (empty if none).
fn labels<K: Resource>(object: &K) -> &BTreeMap<String, String> {
    static EMPTY: BTreeMap<String, String> = BTreeMap::new();
    object.meta().labels.as_ref().unwrap_or(&EMPTY)
}

/// The object's annotations (empty if none).
fn annotations<K: Resource>(object: &K) -> &BTreeMap<String, String> {
    static EMPTY: BTreeMap<String, String> = BTreeMap::new();
    object.meta().annotations.as_ref().unwrap_or(&EMPTY)
}

/// Whether every predicate passes (true when there are none).
pub(crate) fn all_pass<K: Resource + 'static>(
    predicates: &[Predicate<K>],
    old: Option<&K>,
    new: &K,
) -> bool {
    predicates.iter().all(|p| p.passes(old, new))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::Deployment;
    use kube::api::ObjectMeta;

    fn deployment(generation: i64, labels: &[(&str, &str)]) -> Deployment {
        Deployment {
            metadata: ObjectMeta {
                name: Some("d".into()),
                generation: Some(generation),
                labels: (!labels.is_empty()).then(|| {
                    labels
                        .iter()
                        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                        .collect()
                }),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn generation_changed_should_pass_adds_and_spec_changes_only() {
        let p = Predicate::generation_changed();
        let (g1, g1_labelled, g2) = (
            deployment(1, &[]),
            deployment(1, &[("a", "b")]),
            deployment(2, &[]),
        );
        assert!(p.passes(None, &g1), "adds pass");
        assert!(!p.passes(Some(&g1), &g1_labelled), "metadata-only update");
        assert!(p.passes(Some(&g1), &g2), "generation bumped");
    }

    #[test]
    fn labels_changed_should_pass_adds_and_label_changes_only() {
        let p = Predicate::labels_changed();
        let (plain, labelled, bumped) = (
            deployment(1, &[]),
            deployment(1, &[("a", "b")]),
            deployment(2, &[]),
        );
        assert!(p.passes(None, &plain));
        assert!(p.passes(Some(&plain), &labelled));
        assert!(!p.passes(Some(&plain), &bumped), "labels unchanged");
        assert!(
            !p.passes(Some(&plain), &deployment(1, &[])),
            "none and none are equal"
        );
    }

    #[test]
    fn label_selector_should_look_at_the_new_state_only() {
        let p = Predicate::label_selector(LabelSelector::parse("app=web").expect("valid"));
        let (web, other) = (deployment(1, &[("app", "web")]), deployment(1, &[]));
        assert!(p.passes(None, &web));
        assert!(!p.passes(None, &other));
        assert!(p.passes(Some(&other), &web));
        assert!(!p.passes(Some(&web), &other), "moved out of the selection");
    }

    #[test]
    fn combinators_should_follow_boolean_logic() {
        let yes = Predicate::<Deployment>::new(|_, _| true);
        let no = Predicate::<Deployment>::new(|_, _| false);
        let d = deployment(1, &[]);
        assert!(yes.clone().or(no.clone()).passes(None, &d));
        assert!(!yes.clone().and(no.clone()).passes(None, &d));
        assert!(no.clone().not().passes(None, &d));
        assert!(all_pass(&[], None, &d), "no predicates: everything passes");
        assert!(!all_pass(&[yes, no], None, &d));
    }

    #[test]
    fn annotations_changed_should_ignore_other_changes() {
        let p = Predicate::annotations_changed();
        let mut annotated = deployment(1, &[]);
        annotated.metadata.annotations = Some([("k".to_owned(), "v".to_owned())].into());
        assert!(p.passes(Some(&deployment(1, &[])), &annotated));
        assert!(!p.passes(Some(&deployment(1, &[])), &deployment(2, &[("a", "b")])));
    }
}
