//! Who may do what, and what is kept of it: authentication (certificates, static, bootstrap and
//! ServiceAccount tokens), RBAC and the node authorizer, audit, encryption at rest and API
//! Priority and Fairness — driven against an API server in this process (through the
//! transport where a part needs it). One module per part.

#![allow(clippy::unwrap_used)] // test helpers: a failure should panic with the error

mod apf;
mod audit;
mod authn;
mod csr;
mod encryption;
mod identities;
mod rbac;
mod satokens;
