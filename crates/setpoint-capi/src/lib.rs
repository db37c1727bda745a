//! Cluster API in Setpoint: whole clusters as objects. A management cluster holds Cluster,
//! Machine, MachineSet, MachineDeployment and MachineHealthCheck objects
//! (`cluster.x-k8s.io/v1beta2`, upstream's kinds: `api/`); controllers turn them, through
//! providers, into machines, nodes and control planes.
//!
//! This first increment is the API: the five kinds as Rust types, their CRDs generated from the
//! types ([`crds`]), and the `cluster-api` loop ([`run`]) that installs them when `setpoint
//! server` starts with it (off by default: `--controllers='*,cluster-api'`).
//!
//! Not here yet (docs/cluster-api.md):
//! - the controllers (cluster, machine, machine set, machine deployment, machine health check)
//!   and the local infrastructure, bootstrap and control-plane providers;
//! - upstream's defaulting and validating webhooks: what a structural schema cannot say is not
//!   checked or defaulted (e.g. a MachineSet's selector matching its template's labels, the
//!   `cluster.x-k8s.io/cluster-name` label, `replicas` defaulting to 1, MHC's
//!   `nodeStartupTimeoutSeconds` default);
//! - `v1beta1`: upstream serves it too, converted by its conversion webhook. Setpoint's API
//!   server calls CRD conversion webhooks (`setpoint-apiserver/src/crd/conversion/`), but no
//!   v1beta1 ↔ v1beta2 converter exists yet, so only `v1beta2` is served (and stored);
//! - ClusterClass and MachinePool (the Cluster's `spec.topology` is served and kept, not acted
//!   on).

pub mod api;
mod context;
mod crds;
mod run;

pub use api::{Cluster, Machine, MachineDeployment, MachineHealthCheck, MachineSet};
pub use context::CapiContext;
pub use crds::{crds, install_crds};
pub use run::{run, NAME};
