//! Pattern 3 of Setpoint's reconciliation patterns, API → outside world: the set point is an
//! object in the API, the actual state lives outside it. Each provider here is written with the
//! SDK's managed-resource loop (`setpoint_runtime::managed`):
//!
//! - `lb`: a `Service` of type `LoadBalancer` gets a TCP/UDP balancer process on this machine,
//!   listening on an address from a pool and forwarding to the Service's ready endpoints.
//! - `postgres`: `Database`, `Role` and `Grant` (`postgresql.sql.crossplane.io/v1alpha1`, the
//!   fields of Crossplane's provider-sql) against a PostgreSQL server a `ProviderConfig` names.
//! - `certs`: `Issuer`, `ClusterIssuer`, `Certificate` and `CertificateRequest`
//!   (`cert-manager.io/v1`, cert-manager's fields where the feature is the same), issued with
//!   `rcgen` into Secrets and, when asked, files.
//!
//! `setpoint server` runs them in-process as built-in loops (`service-lb`,
//! `provider-postgresql`, `cert-manager`); they run unchanged against any Kubernetes API server.

pub mod certs;
mod context;
pub mod lb;
pub mod postgres;

pub use context::{ProviderContext, ProviderSettings};
