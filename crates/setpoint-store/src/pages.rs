//! [`Pages`]: everything under a prefix, page by page, from one snapshot — the loop every
//! reader of a whole prefix needs (a cache loading, a migration copying, a controller listing
//! its objects), written once.
//!
//! The first page is read at the request's revision (the current one when unset); every later
//! page continues after the last key returned, at the revision the first page was read at, so
//! the pages together are one consistent list however writes continue meanwhile.

use bytes::Bytes;
use setpoint_core::Revision;

use crate::error::Result;
use crate::store::Store;
use crate::types::{ListRequest, ListResult};

/// A cursor over the pages of one list. Each [`next`](Pages::next) reads one page.
///
/// ```no_run
/// # async fn count(store: &dyn setpoint_store::Store) -> setpoint_store::Result<usize> {
/// use setpoint_store::{ListRequest, Pages};
///
/// let mut pages = Pages::new(store, ListRequest::prefix("/registry/pods/").limit(500));
/// let mut keys = 0;
/// while let Some(page) = pages.next().await? {
///     keys += page.kvs.len();
/// }
/// # Ok(keys) }
/// ```
pub struct Pages<'a> {
    store: &'a dyn Store,
    /// The request for the next page; `None` once the last page was read.
    next: Option<ListRequest>,
}

impl<'a> Pages<'a> {
    /// The pages of `request` (its prefix, start, revision and page size) in `store`. The
    /// pages are asked only whether more follow ([`ListRequest::only_more`]): their
    /// `remaining` may be 1 where more than one key is left.
    pub fn new(store: &'a dyn Store, request: ListRequest) -> Pages<'a> {
        Pages {
            store,
            next: Some(request.only_more()),
        }
    }

    /// The next page, `None` after the last one. The first page is always read, so an empty
    /// prefix still yields one (empty) page carrying the revision it was read at. An error
    /// ends nothing: calling again retries the same page.
    ///
    /// Cancel-safe: a dropped call reads the same page again on the next one.
    pub async fn next(&mut self) -> Result<Option<ListResult>> {
        let Some(request) = &self.next else {
            return Ok(None);
        };
        let page = self.store.list(request.clone()).await?;
        self.next = match page.kvs.last() {
            Some(last) if page.more() => Some(ListRequest {
                start: Some(after(&last.key)),
                revision: Some(page.revision),
                ..request.clone()
            }),
            _ => None,
        };
        Ok(Some(page))
    }

    /// Reads every remaining page into one: all their key-values, in key order, and the
    /// revision they were read at (`remaining` is 0).
    pub async fn collect(mut self) -> Result<ListResult> {
        let mut all = ListResult {
            kvs: Vec::new(),
            revision: Revision::ZERO,
            remaining: 0,
        };
        while let Some(page) = self.next().await? {
            all.kvs.extend(page.kvs);
            all.revision = page.revision;
        }
        Ok(all)
    }
}

impl std::fmt::Debug for Pages<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pages").field("next", &self.next).finish()
    }
}

/// The first key after `key`: where the page after one ending at `key` starts.
fn after(key: &[u8]) -> Bytes {
    let mut next = Vec::with_capacity(key.len() + 1);
    next.extend_from_slice(key);
    next.push(0);
    Bytes::from(next)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ModelStore;

    async fn store_with(keys: &[&str]) -> ModelStore {
        let store = ModelStore::new();
        for key in keys {
            store
                .create(Bytes::from(key.to_string()), Bytes::from_static(b"v"))
                .await
                .expect("create");
        }
        store
    }

    #[tokio::test]
    async fn pages_should_yield_every_key_under_the_prefix_once_in_pages_of_the_limit() {
        let store = store_with(&["/a/1", "/a/2", "/a/3", "/a/4", "/a/5", "/b/1"]).await;
        let mut pages = Pages::new(&store, ListRequest::prefix("/a/").limit(2));
        let mut sizes = Vec::new();
        let mut keys = Vec::new();
        while let Some(page) = pages.next().await.expect("page") {
            sizes.push(page.kvs.len());
            keys.extend(page.kvs.into_iter().map(|kv| kv.key));
        }
        assert_eq!(sizes, [2, 2, 1]);
        assert_eq!(keys, ["/a/1", "/a/2", "/a/3", "/a/4", "/a/5"]);
        assert!(pages.next().await.expect("done").is_none());
    }

    #[tokio::test]
    async fn pages_should_read_every_page_at_the_first_pages_revision() {
        let store = store_with(&["/a/1", "/a/2", "/a/3"]).await;
        let mut pages = Pages::new(&store, ListRequest::prefix("/a/").limit(1));
        let first = pages.next().await.expect("page").expect("first");
        store
            .update(
                Bytes::from_static(b"/a/2"),
                Bytes::from_static(b"new"),
                None,
            )
            .await
            .expect("update");
        store
            .create(Bytes::from_static(b"/a/4"), Bytes::from_static(b"v"))
            .await
            .expect("create");
        let rest = pages.collect().await.expect("rest");
        assert_eq!(rest.revision, first.revision);
        let values: Vec<_> = rest.kvs.iter().map(|kv| kv.value.clone()).collect();
        assert_eq!(values, ["v", "v"], "the later pages saw later writes");
    }

    #[tokio::test]
    async fn an_empty_prefix_should_still_yield_one_page_with_its_revision() {
        let store = store_with(&["/b/1"]).await;
        let all = Pages::new(&store, ListRequest::prefix("/a/"))
            .collect()
            .await
            .expect("list");
        assert!(all.kvs.is_empty());
        assert_eq!(all.revision, Revision(1));
    }
}
