//! Where a watcher's objects come from: list and watch requests on one collection URL, for
//! whole objects or (metadata-only) `PartialObjectMetadata`.

use std::fmt;

use futures::stream::BoxStream;
use futures::StreamExt;
use kube::api::{ListParams, ObjectList, WatchEvent, WatchParams};
use kube::core::Request;
use serde::de::DeserializeOwned;

/// Lists and watches one collection.
pub(crate) struct ListWatch<K> {
    client: kube::Client,
    request: Request,
    /// Ask for `PartialObjectMetadata` (and `K` is `PartialObjectMeta<…>`).
    metadata: bool,
    _objects: std::marker::PhantomData<fn() -> K>,
}

impl<K> fmt::Debug for ListWatch<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ListWatch")
            .field("url", &self.request.url_path)
            .field("metadata", &self.metadata)
            .finish()
    }
}

/// A watch's events as they arrive.
pub(crate) type EventStream<K> = BoxStream<'static, Result<WatchEvent<K>, kube::Error>>;

impl<K> ListWatch<K>
where
    K: Clone + DeserializeOwned + Send + 'static,
{
    /// Lists and watches the collection at `url_path` (e.g. `/api/v1/configmaps`), whole
    /// objects or, with `metadata`, `PartialObjectMetadata` only.
    pub(crate) fn new(client: kube::Client, url_path: String, metadata: bool) -> ListWatch<K> {
        ListWatch {
            client,
            request: Request::new(url_path),
            metadata,
            _objects: std::marker::PhantomData,
        }
    }

    /// The collection's URL path, naming it in errors and logs.
    pub(crate) fn resource(&self) -> &str {
        &self.request.url_path
    }

    /// One list request (one page).
    pub(crate) async fn list(&self, params: &ListParams) -> Result<ObjectList<K>, kube::Error> {
        let request = if self.metadata {
            self.request.list_metadata(params)
        } else {
            self.request.list(params)
        };
        let mut request = request.map_err(kube::Error::BuildRequest)?;
        request.extensions_mut().insert("list");
        self.client.request::<ObjectList<K>>(request).await
    }

    /// Opens a watch from `resource_version`.
    pub(crate) async fn watch(
        &self,
        params: &WatchParams,
        resource_version: &str,
    ) -> Result<EventStream<K>, kube::Error> {
        let request = if self.metadata {
            self.request.watch_metadata(params, resource_version)
        } else {
            self.request.watch(params, resource_version)
        };
        let mut request = request.map_err(kube::Error::BuildRequest)?;
        request.extensions_mut().insert("watch");
        let events = self.client.request_events::<K>(request).await?;
        Ok(events.boxed())
    }
}
