//! What an informer tells its handlers: the [`EventHandler`] trait, the [`Deleted`] an
//! `on_delete` receives, and the [`HandlerRegistration`] an added handler is known by.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

/// How a cached object went away.
#[derive(Debug)]
pub enum Deleted<K> {
    /// A watch `DELETED` event, with the object's final state.
    Final(Arc<K>),
    /// The object was missing from a relist, so its deletion was missed: this is the last
    /// state the cache had (a tombstone, client-go's `DeletedFinalStateUnknown`), which may be
    /// stale.
    FinalStateUnknown(Arc<K>),
}

impl<K> Clone for Deleted<K> {
    fn clone(&self) -> Self {
        match self {
            Deleted::Final(o) => Deleted::Final(o.clone()),
            Deleted::FinalStateUnknown(o) => Deleted::FinalStateUnknown(o.clone()),
        }
    }
}

impl<K> Deleted<K> {
    /// The object: its final state, or the last cached state if that is unknown.
    pub fn object(&self) -> &Arc<K> {
        match self {
            Deleted::Final(o) | Deleted::FinalStateUnknown(o) => o,
        }
    }

    /// Whether the deletion was inferred from a relist (the object may be stale).
    pub fn is_final_state_unknown(&self) -> bool {
        matches!(self, Deleted::FinalStateUnknown(_))
    }
}

/// Receives an informer's notifications.
///
/// Handlers are called in order, one notification at a time per handler, each handler on its
/// own task, so a slow handler delays only itself. They should be quick (typically: map to
/// keys and enqueue). A handler that panics has that one notification skipped (and logged);
/// it keeps receiving the next ones.
pub trait EventHandler<K>: Send + Sync + 'static {
    /// An object appeared: in a list (`in_initial_list` is true for the first complete list,
    /// and for the synthetic adds a handler added late receives for the current cache) or
    /// from a watch.
    fn on_add(&self, object: &Arc<K>, in_initial_list: bool) {
        let _ = (object, in_initial_list);
    }

    /// An object changed. A periodic resync delivers `on_update(obj, obj)` (the same `Arc`),
    /// and so does a relist for an object whose resource version did not change.
    fn on_update(&self, old: &Arc<K>, new: &Arc<K>) {
        let _ = (old, new);
    }

    /// An object went away.
    fn on_delete(&self, deleted: &Deleted<K>) {
        let _ = deleted;
    }
}

/// What [`HandlerRegistration`] shares with the handler's task.
#[derive(Debug, Default)]
pub(crate) struct ListenerStatus {
    /// The handler has received the initial list (or its synthetic adds).
    pub(crate) synced: AtomicBool,
}

/// A handler added to an informer. Dropping it does **not** remove the handler; call
/// [`HandlerRegistration::remove`] for that.
pub struct HandlerRegistration {
    status: Arc<ListenerStatus>,
    remover: Mutex<Option<Box<dyn FnOnce() + Send>>>,
}

impl std::fmt::Debug for HandlerRegistration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HandlerRegistration")
            .field("synced", &self.has_synced())
            .finish()
    }
}

impl HandlerRegistration {
    pub(crate) fn new(
        status: Arc<ListenerStatus>,
        remover: Box<dyn FnOnce() + Send>,
    ) -> HandlerRegistration {
        HandlerRegistration {
            status,
            remover: Mutex::new(Some(remover)),
        }
    }

    /// Whether this handler has been delivered the initial list (for a handler added after
    /// the informer synced: the synthetic adds for the cache as it was then).
    pub fn has_synced(&self) -> bool {
        self.status.synced.load(Ordering::Acquire)
    }

    /// Removes the handler: it receives nothing more (a notification being handled finishes).
    pub fn remove(self) {
        if let Some(remove) = self.remover.lock().take() {
            remove();
        }
    }
}
