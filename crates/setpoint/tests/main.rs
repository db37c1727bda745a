//! This crate's integration tests, as one binary: a build links it once, not once per file.
//! Each module covers one area; `cargo test -p setpoint --test integration MODULE::` runs one.

mod common;

mod agent_kubectl;
mod api_crash;
mod api_machinery;
mod cli;
mod console;
mod controller_remote;
mod crd_kubectl;
mod deployment_kubectl;
mod etcd_kubectl;
mod gc_kubectl;
mod gitops_kubectl;
mod ha_etcd;
mod hpa_kubectl;
mod hpa_object_metrics_kubectl;
mod kube_client;
mod kubectl_basics;
mod kubectl_create_generators;
mod logs_kubectl;
mod namespace_kubectl;
mod nodes_kubectl;
mod operator_inprocess;
mod operator_kubectl;
mod pid_autoscaler_kubectl;
mod pods_kubectl;
mod providers_kubectl;
mod python_client;
mod replicaset_kubectl;
mod scheduler_kubectl;
mod security_kubectl;
mod store_crash;
mod top_kubectl;
mod workloads_kubectl;
