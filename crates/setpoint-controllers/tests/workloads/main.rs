//! The workload loops of issue 17 (Jobs, CronJobs, …) against a real in-process API server.
//! Nothing runs pods here: tests write pod statuses by hand, as a kubelet would.
//!
//! Real time: tests poll with generous deadlines and never assert on how long something took.

#[path = "../common/mod.rs"]
mod common;

mod cronjobs;
mod jobs;
