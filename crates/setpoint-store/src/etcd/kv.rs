//! Reads, conditional writes and compaction on etcd. Every write is one transaction: its
//! comparisons are the precondition (the key absent, present, or at an expected `mod_revision`),
//! its success branch the write, and its failure branch a read of the key so that a refusal
//! carries the current value without a second round trip. A refused transaction writes nothing
//! and consumes no revision.

use std::future::Future;

use bytes::Bytes;
use etcd_client::{
    Compare, CompareOp, DeleteOptions, GetOptions, PutOptions, Txn, TxnOp, TxnOpResponse,
    TxnResponse,
};
use setpoint_core::Revision;

use super::errors::Failure;
use super::{key_value, ours, theirs, Inner};
use crate::error::{Result, StoreError};
use crate::store::{prefix_end, validate_key, validate_list};
use crate::types::{Event, EventKind, KeyValue, ListRequest, ListResult};

/// The key read to learn the current revision and to probe old revisions. Reads of it are
/// cheap whether or not it exists; nothing ever writes it.
pub(crate) const PROBE_KEY: &[u8] = b"\0setpoint-probe";

/// How many times a request that could not connect is tried.
const CONNECT_ATTEMPTS: u32 = 5;

/// Whether `error` says the request never left this process: the connection to the member
/// could not be made.
fn not_sent(error: &etcd_client::Error) -> bool {
    match error {
        etcd_client::Error::GRpcStatus(status) => {
            status.code() == tonic::Code::Unavailable && status.message().contains("connect")
        }
        _ => false,
    }
}

impl Inner {
    /// Runs one etcd request within the request timeout, made afresh by `request` for each
    /// attempt: a request that could not even connect to the member the client picked (a dead
    /// member of a cluster) was never sent, so it is sent again, to another member if the
    /// client's balancer picks one, a few times before the failure is returned.
    pub(crate) async fn call<T, F>(
        &self,
        mut request: impl FnMut() -> F,
    ) -> std::result::Result<T, Failure>
    where
        F: Future<Output = std::result::Result<T, etcd_client::Error>>,
    {
        let mut attempt = 1;
        loop {
            match tokio::time::timeout(self.config.request_timeout, request()).await {
                Ok(Err(error)) if attempt < CONNECT_ATTEMPTS && not_sent(&error) => {
                    tracing::debug!(%error, attempt, "etcd request not sent; trying again");
                    attempt += 1;
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                }
                other => return self.outcome(other),
            }
        }
    }

    /// Runs one etcd request within the request timeout, once.
    pub(crate) async fn call_once<T>(
        &self,
        request: impl Future<Output = std::result::Result<T, etcd_client::Error>>,
    ) -> std::result::Result<T, Failure> {
        let result = tokio::time::timeout(self.config.request_timeout, request).await;
        self.outcome(result)
    }

    fn outcome<T>(
        &self,
        result: std::result::Result<
            std::result::Result<T, etcd_client::Error>,
            tokio::time::error::Elapsed,
        >,
    ) -> std::result::Result<T, Failure> {
        match result {
            Ok(result) => result.map_err(Failure::classify),
            Err(_) => Err(Failure::Other(StoreError::Unavailable(format!(
                "etcd did not answer within {:?}",
                self.config.request_timeout
            )))),
        }
    }

    pub(crate) async fn current_revision(&self) -> Result<Revision> {
        let response = self
            .call(|| {
                let mut kv = self.kv.clone();
                async move {
                    kv.get(PROBE_KEY, Some(GetOptions::new().with_count_only()))
                        .await
                }
            })
            .await
            .map_err(Failure::into_store_error)?;
        Ok(ours(header_revision(response.header())?))
    }

    pub(crate) async fn get(&self, key: &[u8]) -> Result<Option<KeyValue>> {
        if key.is_empty() {
            return Ok(None);
        }
        let response = self
            .call(|| {
                let (mut kv, key) = (self.kv.clone(), key.to_vec());
                async move { kv.get(key, None).await }
            })
            .await
            .map_err(Failure::into_store_error)?;
        Ok(response.kvs().first().map(key_value))
    }

    pub(crate) async fn list(&self, request: ListRequest) -> Result<ListResult> {
        validate_list(&request)?;
        let start = request
            .start
            .clone()
            .unwrap_or_else(|| request.prefix.clone());
        let mut options = range_options(&request.prefix);
        if let Some(revision) = request.revision {
            options = options.with_revision(theirs(revision)?);
        }
        if let Some(limit) = request.limit.filter(|l| *l > 0) {
            options = options.with_limit(i64::try_from(limit).unwrap_or(i64::MAX));
        }
        match self
            .call(|| {
                let (mut kv, start, options) = (self.kv.clone(), start.to_vec(), options.clone());
                async move { kv.get(start, Some(options)).await }
            })
            .await
        {
            Ok(response) => {
                let revision = match request.revision {
                    Some(revision) => revision,
                    None => ours(header_revision(response.header())?),
                };
                let kvs: Vec<KeyValue> = response.kvs().iter().map(key_value).collect();
                let count = u64::try_from(response.count()).unwrap_or(0);
                Ok(ListResult {
                    remaining: count.saturating_sub(kvs.len() as u64),
                    kvs,
                    revision,
                })
            }
            Err(failure) => Err(self
                .explain(failure, request.revision.unwrap_or(Revision::ZERO))
                .await),
        }
    }

    pub(crate) async fn count(&self, prefix: &[u8]) -> Result<u64> {
        let options = range_options(prefix).with_count_only();
        let response = self
            .call(|| {
                let (mut kv, prefix, options) = (self.kv.clone(), prefix.to_vec(), options.clone());
                async move { kv.get(prefix, Some(options)).await }
            })
            .await
            .map_err(Failure::into_store_error)?;
        Ok(u64::try_from(response.count()).unwrap_or(0))
    }

    pub(crate) async fn create(&self, key: Bytes, value: Bytes) -> Result<KeyValue> {
        validate_key(&key)?;
        self.check_size(&value)?;
        let txn = Txn::new()
            .when([Compare::version(key.to_vec(), CompareOp::Equal, 0)])
            .and_then([TxnOp::put(key.to_vec(), value.to_vec(), None)])
            .or_else([TxnOp::get(key.to_vec(), None)]);
        let response = self.txn(txn, value.len()).await?;
        let revision = ours(header_revision(response.header())?);
        if response.succeeded() {
            return Ok(KeyValue {
                key,
                value,
                create_revision: revision,
                mod_revision: revision,
                version: 1,
            });
        }
        match read_back(&response) {
            Some(current) => Err(StoreError::AlreadyExists {
                current: Box::new(current),
            }),
            None => Err(inconsistent("a refused create found no key")),
        }
    }

    pub(crate) async fn update(
        &self,
        key: Bytes,
        value: Bytes,
        expected: Option<Revision>,
    ) -> Result<KeyValue> {
        validate_key(&key)?;
        self.check_size(&value)?;
        let txn = Txn::new()
            .when(preconditions(&key, expected)?)
            .and_then([TxnOp::put(
                key.to_vec(),
                value.to_vec(),
                Some(PutOptions::new().with_prev_key()),
            )])
            .or_else([TxnOp::get(key.to_vec(), None)]);
        let response = self.txn(txn, value.len()).await?;
        let revision = ours(header_revision(response.header())?);
        if !response.succeeded() {
            return Err(refusal(&response, expected));
        }
        let prev = response
            .op_responses()
            .into_iter()
            .find_map(|op| match op {
                TxnOpResponse::Put(put) => put.prev_key().map(key_value),
                _ => None,
            })
            .ok_or_else(|| inconsistent("an update returned no previous value"))?;
        Ok(KeyValue {
            key,
            value,
            create_revision: prev.create_revision,
            mod_revision: revision,
            version: prev.version + 1,
        })
    }

    pub(crate) async fn delete(&self, key: Bytes, expected: Option<Revision>) -> Result<Event> {
        validate_key(&key)?;
        let txn = Txn::new()
            .when(preconditions(&key, expected)?)
            .and_then([TxnOp::delete(
                key.to_vec(),
                Some(DeleteOptions::new().with_prev_key()),
            )])
            .or_else([TxnOp::get(key.to_vec(), None)]);
        let response = self.txn(txn, 0).await?;
        let revision = ours(header_revision(response.header())?);
        if !response.succeeded() {
            return Err(refusal(&response, expected));
        }
        let prev = response
            .op_responses()
            .into_iter()
            .find_map(|op| match op {
                TxnOpResponse::Delete(delete) => delete.prev_kvs().first().map(key_value),
                _ => None,
            })
            .ok_or_else(|| inconsistent("a delete returned no deleted value"))?;
        Ok(Event {
            kind: EventKind::Delete,
            kv: KeyValue {
                key,
                value: Bytes::new(),
                create_revision: prev.create_revision,
                mod_revision: revision,
                version: prev.version,
            },
            prev: Some(prev),
        })
    }

    pub(crate) async fn compact(&self, revision: Revision) -> Result<()> {
        // Revision 0 is the empty store before the first write: there is never history before
        // it to forget, so it counts as compacted already (etcd would accept its revision 1).
        if revision == Revision::ZERO {
            return Err(StoreError::Compacted {
                requested: revision,
                compacted: self.compacted_revision(0).await?,
            });
        }
        let at = theirs(revision)?;
        let compact = || {
            let mut kv = self.kv.clone();
            async move { kv.compact(at, None).await }
        };
        match self.call(compact).await {
            Ok(_) => Ok(()),
            // etcd refuses to compact at or below its compaction revision: everything below `at`
            // is gone, `at` itself may still be readable.
            Err(Failure::Compacted) => Err(StoreError::Compacted {
                requested: revision,
                compacted: self.compacted_revision(at - 1).await?,
            }),
            Err(failure) => Err(self.explain(failure, revision).await),
        }
    }

    /// The store error for a failed read or compaction at `requested`.
    pub(crate) async fn explain(&self, failure: Failure, requested: Revision) -> StoreError {
        let outcome = match failure {
            Failure::Compacted => match theirs(requested) {
                Ok(at) => {
                    self.compacted_revision(at)
                        .await
                        .map(|compacted| StoreError::Compacted {
                            requested,
                            compacted,
                        })
                }
                Err(e) => Err(e),
            },
            Failure::FutureRevision => self
                .current_revision()
                .await
                .map(|current| StoreError::FutureRevision { requested, current }),
            other => Ok(other.into_store_error()),
        };
        outcome.unwrap_or_else(|e| e)
    }

    /// Our compacted revision: everything up to and including it is gone. etcd does not report
    /// its compaction revision on reads, so this finds the oldest revision a read still accepts
    /// by bisection between `unreadable` (an etcd revision known to be compacted, or 0) and the
    /// current revision (always readable): a few cheap count-only reads, on error paths only.
    pub(crate) async fn compacted_revision(&self, unreadable: i64) -> Result<Revision> {
        let current = self.current_revision().await?;
        let (mut low, mut high) = (unreadable.max(0), theirs(current)?);
        while high - low > 1 {
            let middle = low + (high - low) / 2;
            let probe = GetOptions::new().with_count_only().with_revision(middle);
            let read = || {
                let (mut kv, probe) = (self.kv.clone(), probe.clone());
                async move { kv.get(PROBE_KEY, Some(probe)).await }
            };
            match self.call(read).await {
                Ok(_) | Err(Failure::FutureRevision) => high = middle,
                Err(Failure::Compacted) => low = middle,
                Err(other) => return Err(other.into_store_error()),
            }
        }
        // `high` is the oldest readable etcd revision: ours is one less, and ours compacted is
        // the one before it.
        Ok(ours(high))
    }

    /// Runs a write transaction, mapping a refusal for size.
    async fn txn(&self, txn: Txn, size: usize) -> Result<TxnResponse> {
        self.call(|| {
            let (mut kv, txn) = (self.kv.clone(), txn.clone());
            async move { kv.txn(txn).await }
        })
        .await
        .map_err(|failure| match failure {
            Failure::TooLarge => StoreError::ValueTooLarge {
                size,
                limit: self.config.max_value_bytes,
            },
            other => other.into_store_error(),
        })
    }

    fn check_size(&self, value: &[u8]) -> Result<()> {
        if value.len() > self.config.max_value_bytes {
            return Err(StoreError::ValueTooLarge {
                size: value.len(),
                limit: self.config.max_value_bytes,
            });
        }
        Ok(())
    }
}

/// Range options for every key under `prefix` (every key, for an empty prefix).
fn range_options(prefix: &[u8]) -> GetOptions {
    match prefix_end(prefix) {
        Some(end) => GetOptions::new().with_range(end.to_vec()),
        None => GetOptions::new().with_from_key(),
    }
}

/// The comparisons of an update or delete: the key exists, at the expected mod revision if any.
fn preconditions(key: &[u8], expected: Option<Revision>) -> Result<Vec<Compare>> {
    let mut compares = vec![Compare::version(key.to_vec(), CompareOp::Greater, 0)];
    if let Some(expected) = expected {
        compares.push(Compare::mod_revision(
            key.to_vec(),
            CompareOp::Equal,
            theirs(expected)?,
        ));
    }
    Ok(compares)
}

/// The key as read by a refused transaction's failure branch.
fn read_back(response: &TxnResponse) -> Option<KeyValue> {
    response.op_responses().into_iter().find_map(|op| match op {
        TxnOpResponse::Get(get) => get.kvs().first().map(key_value),
        _ => None,
    })
}

/// Why an update or delete was refused.
fn refusal(response: &TxnResponse, expected: Option<Revision>) -> StoreError {
    match (read_back(response), expected) {
        (None, _) => StoreError::NotFound,
        (Some(current), Some(expected)) => StoreError::Conflict {
            expected,
            current: Box::new(current),
        },
        (Some(_), None) => inconsistent("an unconditional write of an existing key was refused"),
    }
}

/// The revision in a response's header.
pub(crate) fn header_revision(header: Option<&etcd_client::ResponseHeader>) -> Result<i64> {
    header
        .map(etcd_client::ResponseHeader::revision)
        .ok_or_else(|| inconsistent("a response without a header"))
}

fn inconsistent(what: &str) -> StoreError {
    StoreError::Unavailable(format!("etcd answered inconsistently: {what}"))
}
