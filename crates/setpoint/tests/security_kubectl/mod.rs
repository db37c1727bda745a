//! The doors, tried with real kubectl against a `setpoint server` process: users with their own
//! kubeconfigs, RBAC answers, ServiceAccount tokens, audit lines, Secrets encrypted on disk and
//! in etcd, and limits on a flooding client. One module per part.

#![allow(clippy::unwrap_used)] // test helpers: a failure should panic with the error

mod apf;
mod audit;
mod authn;
mod csr;
mod encryption;
mod identities;
mod rbac;
mod satokens;
