//! Setpoint's object model: the types every layer shares, with no I/O.
//!
//! For now this holds the store's notion of time, [`Revision`]. The API object model (metadata,
//! group/version/kinds, selectors, `Status` errors) joins it as the API server is built.

mod revision;

pub use revision::{ParseRevisionError, Revision};
