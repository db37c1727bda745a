//! What each Sync last verified, so a reconcile woken by one drifted object does not dry-run
//! every other one: per object, a digest of what was applied and the `resourceVersion` the
//! live object had once it was known equal to it.
//!
//! An object is taken as still equal — skipped, no request — only when what the Sync would
//! apply has the same digest and the drift watch's cache holds the same `resourceVersion`
//! (any write to the object changes it, and the watch event that brings the new one also
//! enqueues the Sync). Anything else (not cached yet, changed, deleted) is dry-run as usual.
//! Every `interval`, and on a reconcile request, a reconcile verifies everything again, so a
//! missed event costs at most an interval, as without the memo.

use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::time::Duration;

use parking_lot::Mutex;
use setpoint_runtime::ObjectKey;
use tokio::time::Instant;

use super::apply::Applied;
use super::prepare::Desired;
use crate::manifests::ObjectId;

/// One Sync's memo.
struct Memo {
    /// When every object was last verified.
    verified_at: Instant,
    /// Per object: the digest of what was applied, and the live `resourceVersion` equal to it.
    objects: HashMap<ObjectId, (u64, String)>,
}

/// Every Sync's memo.
#[derive(Default)]
pub(crate) struct Memos {
    inner: Mutex<HashMap<ObjectKey, Memo>>,
}

fn digest(desired: &Desired) -> u64 {
    let mut hasher = DefaultHasher::new();
    desired.object.to_string().hash(&mut hasher);
    hasher.finish()
}

impl Memos {
    /// The objects of `desired` known equal to their live state (`live` gives the watch's
    /// cached `resourceVersion`); none when the last full verification is `full_after` old.
    pub(crate) fn verified(
        &self,
        sync: &ObjectKey,
        desired: &[Desired],
        live: &HashMap<ObjectId, String>,
        full_after: Duration,
    ) -> HashSet<ObjectId> {
        let inner = self.inner.lock();
        let Some(memo) = inner.get(sync) else {
            return HashSet::new();
        };
        if memo.verified_at.elapsed() >= full_after {
            return HashSet::new();
        }
        desired
            .iter()
            .filter(|d| {
                memo.objects
                    .get(&d.id)
                    .is_some_and(|(hash, rv)| *hash == digest(d) && live.get(&d.id) == Some(rv))
            })
            .map(|d| d.id.clone())
            .collect()
    }

    /// Records a successful apply of `desired`; `full` when nothing was skipped.
    pub(crate) fn record(
        &self,
        sync: &ObjectKey,
        desired: &[Desired],
        applied: &[Applied],
        full: bool,
    ) {
        let mut inner = self.inner.lock();
        let previous = inner.remove(sync);
        let by_id: HashMap<&ObjectId, &Desired> = desired.iter().map(|d| (&d.id, d)).collect();
        let mut objects = HashMap::with_capacity(applied.len());
        for a in applied {
            let Some(d) = by_id.get(&a.id) else { continue };
            let entry = match &a.resource_version {
                Some(rv) => Some((digest(d), rv.clone())),
                None => previous
                    .as_ref()
                    .and_then(|p| p.objects.get(&a.id).cloned()),
            };
            if let Some(entry) = entry {
                objects.insert(a.id.clone(), entry);
            }
        }
        let verified_at = match (&previous, full) {
            (Some(p), false) => p.verified_at,
            _ => Instant::now(),
        };
        inner.insert(
            sync.clone(),
            Memo {
                verified_at,
                objects,
            },
        );
    }

    /// Forgets a Sync's memo (after a failure: verify everything next time).
    pub(crate) fn forget(&self, sync: &ObjectKey) {
        self.inner.lock().remove(sync);
    }
}

#[cfg(test)]
mod tests {
    use super::super::apply::Change;
    use super::*;
    use serde_json::json;

    fn desired(name: &str, value: &str) -> Desired {
        let object = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "ns"}, "data": {"k": value}});
        Desired {
            id: ObjectId::of(&object).expect("id"),
            version: "v1".to_owned(),
            object,
        }
    }

    fn applied(d: &Desired, rv: Option<&str>) -> Applied {
        Applied {
            id: d.id.clone(),
            change: Change::Unchanged,
            resource_version: rv.map(str::to_owned),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn only_objects_with_the_same_digest_and_version_should_be_skipped() {
        let memos = Memos::default();
        let sync = ObjectKey::namespaced("ns", "s");
        let (a, b) = (desired("a", "1"), desired("b", "1"));
        let all = vec![a.clone(), b.clone()];
        let hour = Duration::from_secs(3600);
        let live = HashMap::from([
            (a.id.clone(), "5".to_owned()),
            (b.id.clone(), "6".to_owned()),
        ]);
        assert!(
            memos.verified(&sync, &all, &live, hour).is_empty(),
            "no memo yet"
        );
        memos.record(
            &sync,
            &all,
            &[applied(&a, Some("5")), applied(&b, Some("6"))],
            true,
        );
        assert_eq!(memos.verified(&sync, &all, &live, hour).len(), 2);
        // b changed live; a changed in git.
        let live = HashMap::from([
            (a.id.clone(), "5".to_owned()),
            (b.id.clone(), "9".to_owned()),
        ]);
        let changed = vec![desired("a", "2"), b.clone()];
        assert!(memos.verified(&sync, &changed, &live, hour).is_empty());
        // An interval later, everything is verified again.
        let live = HashMap::from([
            (a.id.clone(), "5".to_owned()),
            (b.id.clone(), "6".to_owned()),
        ]);
        tokio::time::advance(hour).await;
        assert!(memos.verified(&sync, &all, &live, hour).is_empty());
        memos.forget(&sync);
        assert!(memos.verified(&sync, &all, &live, Duration::MAX).is_empty());
    }
}
