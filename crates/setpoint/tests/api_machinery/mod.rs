//! The API machinery operators rely on, driven by the real `kubectl` against a Setpoint
//! server, one module per topic: admission webhooks and policies (`admission`), API
//! aggregation (`aggregation`), CRD conversion webhooks (`conversion`), server-side apply and
//! field management (`apply`), the objects clients assume (`defaults`), every built-in kind
//! (`kinds`) and those that describe the cluster itself (`cluster_kinds`), `/metrics` and
//! health checks (`metrics`), quota and LimitRange admission (`quota`, `limit_range`).

#![allow(clippy::unwrap_used)] // test helpers: a failure should panic

mod admission;
mod aggregation;
mod apply;
mod cluster_kinds;
mod conversion;
mod defaults;
mod kinds;
mod limit_range;
mod metrics;
mod quota;
