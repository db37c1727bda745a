//! [`WatchError`]: what failed in a watcher — a list, a watch request, or a watch stream.

/// Why a list or watch failed. The watcher yields it for visibility, then backs off and
/// carries on; it never ends the watcher.
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    /// A list request (one page) failed.
    #[error("listing {resource} failed{}", code_suffix(.source))]
    List {
        /// The collection, as its URL path (e.g. `/api/v1/namespaces/ns/configmaps`).
        resource: String,
        /// What went wrong.
        #[source]
        source: kube::Error,
    },
    /// A watch request was refused, or its stream broke.
    #[error("watching {resource} failed{}", code_suffix(.source))]
    Watch {
        /// The collection, as its URL path.
        resource: String,
        /// What went wrong.
        #[source]
        source: kube::Error,
    },
    /// The server ended a watch with an `ERROR` event (other than `410 Gone`, which relists).
    #[error("watching {resource}: the server sent an error event (HTTP {code}): {message}")]
    ErrorEvent {
        /// The collection, as its URL path.
        resource: String,
        /// The status code of the event's `Status`.
        code: u16,
        /// The event's `Status` message.
        message: String,
    },
    /// A watch ended at once without delivering anything, which suggests a server refusing
    /// watches; the watcher backs off before renewing it.
    #[error("watching {resource}: the watch ended after {elapsed:?} without any event")]
    VeryShortWatch {
        /// The collection, as its URL path.
        resource: String,
        /// How long the watch lasted.
        elapsed: std::time::Duration,
    },
    /// A streaming list ended before the bookmark that completes it.
    #[error("streaming list of {resource} ended before its initial-events-end bookmark")]
    IncompleteStream {
        /// The collection, as its URL path.
        resource: String,
    },
}

impl WatchError {
    /// The HTTP status code of the failure, when the server answered with one.
    pub fn status_code(&self) -> Option<u16> {
        match self {
            WatchError::List { source, .. } | WatchError::Watch { source, .. } => {
                status_code(source)
            }
            WatchError::ErrorEvent { code, .. } => Some(*code),
            WatchError::VeryShortWatch { .. } | WatchError::IncompleteStream { .. } => None,
        }
    }

    /// The error with all its causes, one line (for logs and `last_error`).
    pub(crate) fn report(&self) -> String {
        let mut out = self.to_string();
        let mut cause = std::error::Error::source(self);
        while let Some(c) = cause {
            out.push_str(": ");
            out.push_str(&c.to_string());
            cause = c.source();
        }
        out
    }
}

/// The status code of a `kube` error that carries one.
pub(crate) fn status_code(error: &kube::Error) -> Option<u16> {
    match error {
        kube::Error::Api(status) if status.code != 0 => Some(status.code),
        _ => None,
    }
}

fn code_suffix(error: &kube::Error) -> String {
    match status_code(error) {
        Some(code) => format!(" (HTTP {code})"),
        None => String::new(),
    }
}
