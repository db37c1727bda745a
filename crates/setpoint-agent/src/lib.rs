//! Setpoint's node agent (the kubelet's part): registers a Node, keeps its Lease and `Ready`
//! condition, and runs the pods bound to it as real local processes — there is no container
//! runtime: a container's `command`+`args`, `env` and `workingDir` become a process group, and
//! `image` is recorded, not pulled. Logs go to files that the API server serves through
//! `pods/log`; the CPU and memory of the node and of each container are sampled from `/proc`
//! and served for the API server's `metrics.k8s.io` (`kubectl top`).
//!
//! [`run`] runs the agent for one node; [`run_simulated`] runs many simulated nodes whose pods
//! become `Running` without processes (as KWOK does), for scale tests.
//!
//! Like the built-in loops, the agent talks to the API only through the SDK's client, so it
//! runs in-process beside `setpoint server` or alone against any Setpoint API server.

mod cleanup;
mod config;
mod dns;
mod error;
mod exec;
mod logs;
mod metrics;
mod network;
mod node;
mod pods;
mod probes;
mod process;
mod proxy;
mod run;
mod server;
mod shim;
mod simulated;
mod streams;
mod volumes;

pub use cleanup::{cleanup, CleanupReport};
pub use config::{AgentConfig, ContainerTracking};
pub use dns::forward::DnsUpstream;
pub use error::AgentError;
pub use metrics::DEFAULT_METRICS_INTERVAL;
pub use network::{bench_pod_network, PodNetworkMode, PodNetworkTimes};
pub use proxy::{
    service_rulesets, userspace_throughput, ProxyMode, ServiceRulesets, ServicesConfig,
};
pub use run::run;
pub use shim::shim_main;
pub use simulated::{
    run_simulated, SimulatedNodes, SIMULATED_EXIT_CODE, SIMULATED_LABEL, SIMULATED_RUN_TIME,
};
pub use volumes::{MountMode, LOCAL_PATH_ANNOTATION};
