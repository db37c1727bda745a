//! The audit log: a record of who asked the API server for what, when, and what it answered —
//! kube-apiserver's audit (`audit.k8s.io/v1` policies and events, the log backend as JSON
//! lines, lumberjack's rotation). Off until [`Api::enable_audit`]; `setpoint server` turns it
//! on by default (docs/design/audit.md).
//!
//! - `policy.rs`: which requests are recorded, at which level and stages;
//! - `event.rs`: the event and its JSON form;
//! - `record.rs`: one request's events around `Api::handle` (called from `lib.rs`'s
//!   `Handler for Api`), and the transport's own refusals (401, 403);
//! - `writer.rs`: the queue and thread that write events without blocking requests;
//! - `rotate.rs`: the log file and its rotation.
//!
//! Other parts add to a request's events with [`annotate`] (the authorizer's decision,
//! `authorization.k8s.io/decision` and `…/reason`); a part that runs a request as an
//! impersonated user puts the sender in its extensions as
//! [`ImpersonatedBy`](crate::server::ImpersonatedBy).

mod event;
mod policy;
mod record;
mod rotate;
mod writer;

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

pub use event::Level;
pub use policy::{Policy, DEFAULT_POLICY};
pub(crate) use record::{finish, Recording};

use crate::api::Api;
use crate::auth::User;

/// A megabyte, as `--audit-log-maxsize` counts (lumberjack's: 2^20 bytes).
pub const MEGABYTE: u64 = 1024 * 1024;

/// Where the audit log goes and how it is rotated.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct AuditConfig {
    /// The policy deciding what is recorded.
    pub policy: Policy,
    /// Where the events go.
    pub log: AuditLog,
    /// The largest a log file may grow, in bytes, before it is rotated; 0: no limit
    /// (`--audit-log-maxsize` is in megabytes).
    pub max_size_bytes: u64,
    /// How many days rotated files are kept; 0: no limit.
    pub max_age_days: u64,
    /// How many rotated files are kept; 0: all.
    pub max_backups: usize,
}

impl AuditConfig {
    /// Events of `policy` to `log`, rotated at 100 MB, keeping 10 rotated files of any age.
    pub fn new(policy: Policy, log: AuditLog) -> Self {
        AuditConfig {
            policy,
            log,
            max_size_bytes: 100 * MEGABYTE,
            max_age_days: 0,
            max_backups: 10,
        }
    }
}

/// Where the audit events go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AuditLog {
    /// A file (created mode 0600, its directory 0700), rotated by size.
    File(PathBuf),
    /// The process's standard output (not rotated).
    Stdout,
}

/// Failure to set up the audit log.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// The policy file could not be read.
    #[error("cannot read the audit policy {path}")]
    ReadPolicy {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The policy is not a valid `audit.k8s.io/v1` Policy.
    #[error("the audit policy {path} is invalid: {problem}")]
    BadPolicy {
        /// The file.
        path: String,
        /// What is wrong.
        problem: String,
    },
    /// The log could not be opened, or its writer started.
    #[error("cannot open the audit log {path}")]
    OpenLog {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The audit log was already enabled.
    #[error("the audit log is already enabled")]
    AlreadyEnabled,
}

/// What the audit log has counted, for `/metrics`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct AuditFigures {
    /// Events produced (`apiserver_audit_event_total`).
    pub events: u64,
    /// Events dropped or not written (`apiserver_audit_error_total{plugin="log"}`).
    pub errors: u64,
    /// Requests by the level the policy gave them (`apiserver_audit_level_total`).
    pub levels: Vec<(&'static str, u64)>,
}

/// The policy and the writer of an enabled audit log.
pub(crate) struct Auditor {
    policy: Policy,
    writer: writer::Writer,
}

impl Api {
    /// Starts recording requests as `config` says. Fails if the log cannot be opened, or if
    /// the audit log is already enabled.
    pub fn enable_audit(&self, config: AuditConfig) -> Result<(), AuditError> {
        if self.audit.get().is_some() {
            return Err(AuditError::AlreadyEnabled);
        }
        let sink = match &config.log {
            AuditLog::Stdout => writer::Sink::Stdout,
            AuditLog::File(path) => {
                let rotation = rotate::Rotation {
                    max_size: config.max_size_bytes,
                    max_age: (config.max_age_days > 0)
                        .then(|| Duration::from_secs(config.max_age_days * 86_400)),
                    max_backups: config.max_backups,
                };
                writer::file_sink(path, rotation).map_err(|source| AuditError::OpenLog {
                    path: path.clone(),
                    source,
                })?
            }
        };
        let writer = writer::Writer::start(sink).map_err(|source| AuditError::OpenLog {
            path: match &config.log {
                AuditLog::File(path) => path.clone(),
                AuditLog::Stdout => PathBuf::from("-"),
            },
            source,
        })?;
        let auditor: Arc<dyn std::any::Any + Send + Sync> = Arc::new(Auditor {
            policy: config.policy,
            writer,
        });
        self.audit
            .set(auditor)
            .map_err(|_| AuditError::AlreadyEnabled)
    }

    /// What the audit log has counted; `None` if it is not enabled.
    #[must_use]
    pub fn audit_figures(&self) -> Option<AuditFigures> {
        let auditor = auditor_of(self)?;
        let counters = &auditor.writer.counters;
        let levels = [
            Level::None,
            Level::Metadata,
            Level::Request,
            Level::RequestResponse,
        ];
        Some(AuditFigures {
            events: counters.events.load(Ordering::Relaxed),
            errors: counters.errors.load(Ordering::Relaxed),
            levels: levels
                .iter()
                .zip(&counters.levels)
                .map(|(level, n)| (level.as_str(), n.load(Ordering::Relaxed)))
                .collect(),
        })
    }
}

/// The audit log of `api`, if enabled.
fn auditor_of(api: &Api) -> Option<Arc<Auditor>> {
    api.audit.get()?.clone().downcast::<Auditor>().ok()
}

/// Starts recording `request` (its [`User`] already in its extensions), if the audit log is
/// enabled and its policy records it.
pub(crate) fn start(api: &Api, request: &mut http::Request<Bytes>) -> Option<Recording> {
    record::start(&auditor_of(api)?, request)
}

/// Records a request the transport refused itself, if the audit log is enabled.
pub(crate) fn refused(
    api: &Api,
    request: &http::request::Parts,
    user: Option<&User>,
    failure: &setpoint_core::ApiError,
) {
    if let Some(auditor) = auditor_of(api) {
        record::refused(&auditor, request, user, failure);
    }
}

/// Adds `key: value` to the annotations of the audit events of the request whose extensions
/// are `extensions` (not yet recorded ones: the `ResponseComplete` event carries every
/// annotation made while the request was handled). Does nothing when the request is not
/// recorded.
#[allow(dead_code)] // the hook for the authorizer's decision, which calls it once it lands
pub(crate) fn annotate(extensions: &http::Extensions, key: &str, value: impl Into<String>) {
    if let Some(shared) = extensions.get::<Arc<record::Shared>>() {
        shared
            .annotations
            .lock()
            .insert(key.to_owned(), value.into());
    }
}
