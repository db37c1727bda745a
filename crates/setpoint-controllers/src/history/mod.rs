//! ControllerRevisions, the template history StatefulSets and DaemonSets share
//! (kube-controller-manager's `pkg/controller/history`).
//!
//! - [`revision`]: what a revision is made of — the patch stored in `data` (the template with
//!   `$patch: replace`, which `kubectl rollout undo` sends back as a strategic merge patch),
//!   its hash (`controller.kubernetes.io/hash`, mixed with the owner's `collisionCount`), its
//!   name (`OWNER-HASH`) and equality of two revisions.
//! - [`store`]: the revisions of one owner read from the cache and claimed, the update
//!   revision found or made (an equal older revision is renumbered rather than duplicated; a
//!   name taken by different data bumps `collisionCount`), and truncation to
//!   `revisionHistoryLimit` that never deletes a revision a live pod still runs.
//!
//! Promises: revision numbers only grow; a revision's `data` is never rewritten; revisions are
//! controlled by their owner (adopted when orphaned and selected, released when no longer
//! selected), so the garbage collector deletes them with it.

mod revision;
mod store;

pub(crate) use revision::{template_of_revision, CONTROLLER_REVISION_HASH};
pub(crate) use store::{claim_revisions, truncate, update_revision, HistoryError, Owner};
