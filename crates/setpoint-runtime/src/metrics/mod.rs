//! Prometheus metrics for everything the SDK runs: work queues, controllers, informers and
//! leader election, in the text exposition format (version 0.0.4), served over HTTP at
//! `/metrics`.
//!
//! Use one [`Metrics`] registry per process (or per test): components register closures
//! that return their snapshot ([`WorkQueue::metrics`](crate::WorkQueue::metrics),
//! [`InformerFactory::metrics`](crate::InformerFactory::metrics), …), and each scrape calls
//! them and renders what they return, so nothing is copied in the background, no global
//! state exists, and two registries (two controllers in one test binary) never collide.
//!
//! Names and labels follow controller-runtime (`workqueue_*`, `controller_runtime_*`,
//! `leader_election_master_status`), so existing dashboards and alerts work; informer metrics
//! are Setpoint's own (`setpoint_informer_*`). `docs/design/runtime.md` ("Metrics") lists
//! every metric. Durations are histograms in seconds with one fixed bucket layout (see
//! [`Timing`](crate::Timing)).
//!
//! The text is written by a small encoder of our own rather than `prometheus-client`: that
//! crate writes OpenMetrics 1.0 (its own content type, `# EOF`, `_total` handled by the
//! encoder), while scrapers and dashboards built for controller-runtime expect the 0.0.4
//! text format, and read-at-scrape sources need families merged across sources (two queues
//! both write `workqueue_depth`), which is what [`Encoder`] does.

mod components;
mod encoder;
mod registry;
mod server;

pub use encoder::Encoder;
pub use registry::Metrics;
