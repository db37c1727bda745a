//! The crate's one error type: a configuration that cannot be used. Everything else in this
//! crate is total — bad observations become conditions in a recommendation, never panics.

/// A configuration was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A field is out of range; the message names it.
    #[error("invalid configuration: {0}")]
    Invalid(String),
}

/// `Result` with [`ConfigError`].
pub type Result<T, E = ConfigError> = std::result::Result<T, E>;
