//! What can go wrong between a managed object and its PostgreSQL server. Every one of these
//! reaches the managed-resource loop as an external error: `Synced=False` with the message
//! (and its sources), retried with back-off.

/// Why the provider could not reach the server or do what the object asks.
#[derive(Debug, thiserror::Error)]
pub enum PostgresError {
    /// The object's ProviderConfig, a credentials or password Secret, or a referenced object
    /// could not be read.
    #[error("reading {what}")]
    Read {
        /// What was read (`ProviderConfig default`, `Secret ns/name`, `Role app`).
        what: String,
        /// Why it failed.
        #[source]
        source: kube::Error,
    },
    /// A Secret lacks a key the provider needs.
    #[error("Secret {secret} has no key {key:?}")]
    MissingKey {
        /// The Secret, `namespace/name`.
        secret: String,
        /// The key.
        key: String,
    },
    /// The ProviderConfig or the object asks for something the provider does not do.
    #[error("{0}")]
    Invalid(String),
    /// The server could not be reached or refused the login.
    #[error("connecting to PostgreSQL at {endpoint}")]
    Connect {
        /// `host:port`.
        endpoint: String,
        /// Why.
        #[source]
        source: tokio_postgres::Error,
    },
    /// A statement failed.
    #[error("{what}")]
    Sql {
        /// What the statement was for.
        what: String,
        /// The server's (or the connection's) error.
        #[source]
        source: tokio_postgres::Error,
    },
}

impl PostgresError {
    /// A failed statement, described by `what`.
    pub(crate) fn sql(what: impl Into<String>) -> impl FnOnce(tokio_postgres::Error) -> Self {
        let what = what.into();
        move |source| PostgresError::Sql { what, source }
    }
}
