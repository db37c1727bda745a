//! [`EncryptedStore`]: a [`Store`] whose values of the configured resources are encrypted on
//! their way in (create, update) and decrypted on their way out (get, list, watch events and
//! their previous values, the current values a failed write carries, a delete's deleted
//! value). Keys, revisions and every other call pass through unchanged.
//!
//! A value that does not decrypt fails a `get` with [`StoreError::Corrupt`] naming its key (a
//! `500 Internal error` at the API, as kube-apiserver answers). In a list or a watch it is
//! logged and handed on as stored — ciphertext, never plaintext — so that the other objects
//! still list; the API's watch cache skips it as undecodable.

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt as _;
use setpoint_core::Revision;
use setpoint_store::{
    Event, KeyValue, ListRequest, ListResult, Result, Store, StoreError, WatchStream,
};

use super::EncryptionConfig;

/// A store that encrypts what [`EncryptionConfig`] says to.
pub struct EncryptedStore {
    inner: Arc<dyn Store>,
    config: Arc<EncryptionConfig>,
}

impl EncryptedStore {
    /// Wraps `inner`.
    pub fn new(inner: Arc<dyn Store>, config: Arc<EncryptionConfig>) -> EncryptedStore {
        EncryptedStore { inner, config }
    }

    fn seal(&self, key: &Bytes, plain: Bytes) -> Result<Bytes> {
        self.config.to_storage(key, plain).map_err(|e| {
            StoreError::Corrupt(format!("unable to transform key {:?}: {e}", lossy(key)))
        })
    }

    fn open(&self, kv: &mut KeyValue) -> Result<()> {
        if kv.value.is_empty() {
            return Ok(());
        }
        let stored = kv.value.clone();
        kv.value = self.config.from_storage(&kv.key, stored).map_err(|e| {
            StoreError::Corrupt(format!("unable to transform key {:?}: {e}", lossy(&kv.key)))
        })?;
        Ok(())
    }

    /// Decrypts `kv` in a list or an event: one that fails is logged and left as stored.
    fn open_or_log(config: &EncryptionConfig, kv: &mut KeyValue) {
        if kv.value.is_empty() {
            return;
        }
        match config.from_storage(&kv.key, kv.value.clone()) {
            Ok(plain) => kv.value = plain,
            Err(e) => tracing::error!(
                key = %lossy(&kv.key),
                error = %e,
                "a stored value does not decrypt; it is left out of lists and watches (check the encryption configuration's keys)"
            ),
        }
    }

    /// A failed write's error, with the current value it carries decrypted.
    fn open_error(&self, error: StoreError) -> StoreError {
        match error {
            StoreError::AlreadyExists { mut current } => {
                Self::open_or_log(&self.config, &mut current);
                StoreError::AlreadyExists { current }
            }
            StoreError::Conflict {
                expected,
                mut current,
            } => {
                Self::open_or_log(&self.config, &mut current);
                StoreError::Conflict { expected, current }
            }
            other => other,
        }
    }
}

fn lossy(key: &[u8]) -> String {
    String::from_utf8_lossy(key).into_owned()
}

#[async_trait]
impl Store for EncryptedStore {
    async fn current_revision(&self) -> Result<Revision> {
        self.inner.current_revision().await
    }

    async fn get(&self, key: &[u8]) -> Result<Option<KeyValue>> {
        let mut kv = self.inner.get(key).await?;
        if let Some(kv) = &mut kv {
            self.open(kv)?;
        }
        Ok(kv)
    }

    async fn list(&self, request: ListRequest) -> Result<ListResult> {
        let mut result = self.inner.list(request).await?;
        for kv in &mut result.kvs {
            Self::open_or_log(&self.config, kv);
        }
        Ok(result)
    }

    async fn count(&self, prefix: &[u8]) -> Result<u64> {
        self.inner.count(prefix).await
    }

    async fn create(&self, key: Bytes, value: Bytes) -> Result<KeyValue> {
        let sealed = self.seal(&key, value.clone())?;
        let mut kv = self
            .inner
            .create(key, sealed)
            .await
            .map_err(|e| self.open_error(e))?;
        kv.value = value;
        Ok(kv)
    }

    async fn update(
        &self,
        key: Bytes,
        value: Bytes,
        expected: Option<Revision>,
    ) -> Result<KeyValue> {
        let sealed = self.seal(&key, value.clone())?;
        let mut kv = self
            .inner
            .update(key, sealed, expected)
            .await
            .map_err(|e| self.open_error(e))?;
        kv.value = value;
        Ok(kv)
    }

    async fn delete(&self, key: Bytes, expected: Option<Revision>) -> Result<Event> {
        let mut event = self
            .inner
            .delete(key, expected)
            .await
            .map_err(|e| self.open_error(e))?;
        if let Some(prev) = &mut event.prev {
            Self::open_or_log(&self.config, prev);
        }
        Ok(event)
    }

    async fn watch(&self, prefix: Bytes, after: Revision) -> Result<WatchStream> {
        let stream = self.inner.watch(prefix, after).await?;
        let config = self.config.clone();
        Ok(Box::pin(stream.map(move |batch| {
            let mut batch = batch?;
            for event in &mut batch.events {
                Self::open_or_log(&config, &mut event.kv);
                if let Some(prev) = &mut event.prev {
                    Self::open_or_log(&config, prev);
                }
            }
            Ok(batch)
        })))
    }

    fn watch_progress_is_prompt(&self) -> bool {
        self.inner.watch_progress_is_prompt()
    }

    async fn compact(&self, revision: Revision) -> Result<()> {
        self.inner.compact(revision).await
    }
}

#[cfg(test)]
mod tests;
