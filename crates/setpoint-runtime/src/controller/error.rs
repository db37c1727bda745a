//! [`ControllerError`]: why a controller stopped without being asked to.

use std::fmt;
use std::time::Duration;

/// Why [`Controller::run`](super::Controller::run) failed. Reconcile errors are never here:
/// they are retried (and logged and counted), not returned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ControllerError {
    /// Some informer caches did not complete their first list in time, so no reconcile ran.
    /// Usually a resource the server does not serve (404: a missing CRD) or may not be listed
    /// (403: missing RBAC); each informer's last error says which.
    #[error(
        "controller {controller}: informer caches not synced within {timeout:?}: {}",
        Unsynced(unsynced)
    )]
    CacheSyncTimeout {
        /// The controller's name.
        controller: String,
        /// The cache-sync timeout that expired.
        timeout: Duration,
        /// The informers that had not synced, with their last errors.
        unsynced: Vec<UnsyncedInformer>,
    },
}

/// An informer that had not synced when the cache-sync timeout expired.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnsyncedInformer {
    /// The informer's label: its resource plural and qualifiers (e.g. `configmaps`,
    /// `pods{metadata}`), as in the informer metrics.
    pub informer: String,
    /// Its most recent list/watch error, if any was reported.
    pub last_error: Option<String>,
}

impl fmt::Display for UnsyncedInformer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.last_error {
            Some(error) => write!(f, "{} (last error: {error})", self.informer),
            None => write!(f, "{} (no error reported yet)", self.informer),
        }
    }
}

/// Displays a list of unsynced informers, `; `-separated.
struct Unsynced<'a>(&'a [UnsyncedInformer]);

impl fmt::Display for Unsynced<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, informer) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{informer}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_sync_timeout_should_name_each_informer_and_its_last_error() {
        let e = ControllerError::CacheSyncTimeout {
            controller: "widgets".into(),
            timeout: Duration::from_secs(2),
            unsynced: vec![
                UnsyncedInformer {
                    informer: "widgets".into(),
                    last_error: Some("list widgets: 404 Not Found".into()),
                },
                UnsyncedInformer {
                    informer: "pods{metadata}".into(),
                    last_error: None,
                },
            ],
        };
        assert_eq!(
            e.to_string(),
            "controller widgets: informer caches not synced within 2s: widgets (last error: \
             list widgets: 404 Not Found); pods{metadata} (no error reported yet)"
        );
    }
}
