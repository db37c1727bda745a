//! The informers a controller reads from ("sources"), as the runner sees them: whatever their
//! object type, each can be waited on until synced, asked for its last error, and has one
//! handler of this controller to remove when the controller stops.

use std::fmt::Debug;

use futures::future::BoxFuture;
use kube::Resource;
use serde::de::DeserializeOwned;

use super::error::UnsyncedInformer;
use crate::{Enqueuer, HandlerRegistration, InformerFactory, ObjectKey, SharedInformer};

/// What the runner needs of an informer of any type.
pub(crate) trait SyncStatus: Send + Sync {
    /// Its label, as in the informer metrics.
    fn label(&self) -> String;
    /// Whether its cache has synced.
    fn is_synced(&self) -> bool;
    /// Its most recent list/watch error.
    fn last_error(&self) -> Option<String>;
    /// Resolves once it has synced.
    fn synced(&self) -> BoxFuture<'static, ()>;
}

impl<K> SyncStatus for SharedInformer<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    fn label(&self) -> String {
        SharedInformer::label(self).to_owned()
    }

    fn is_synced(&self) -> bool {
        self.store().is_synced()
    }

    fn last_error(&self) -> Option<String> {
        SharedInformer::last_error(self)
    }

    fn synced(&self) -> BoxFuture<'static, ()> {
        let informer = self.clone();
        Box::pin(async move { informer.wait_until_synced().await })
    }
}

/// An informer with this controller's handler on it.
pub(crate) struct Source {
    /// The informer.
    pub(crate) informer: Box<dyn SyncStatus>,
    /// The handler, removed when the controller stops.
    pub(crate) registration: HandlerRegistration,
}

impl Source {
    /// The informer as an [`UnsyncedInformer`], if it has not synced.
    pub(crate) fn unsynced(&self) -> Option<UnsyncedInformer> {
        (!self.informer.is_synced()).then(|| UnsyncedInformer {
            informer: self.informer.label(),
            last_error: self.informer.last_error(),
        })
    }
}

/// Creates a secondary informer (owned or watched kind) and adds the controller's handler to
/// it; run when the controller starts.
pub(crate) type Trigger = Box<dyn FnOnce(&InformerFactory, Enqueuer<ObjectKey>) -> Source + Send>;

/// Removes every handler when dropped, so a stopped (or cancelled) controller leaves no
/// handler enqueueing into its dead queue.
#[derive(Default)]
pub(crate) struct Sources(pub(crate) Vec<Source>);

impl Drop for Sources {
    fn drop(&mut self) {
        for source in self.0.drain(..) {
            source.registration.remove();
        }
    }
}
