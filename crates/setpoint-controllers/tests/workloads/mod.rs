//! The workload loops of issue 17 against a real in-process API server (the loops under test
//! run in the test process; test-side "kubelets" write pod status).
//!
//! Real time: tests poll with generous deadlines and never assert on how long something took.

mod cronjobs;
mod daemonsets;
mod disruption;
mod endpoints;
mod jobs;
mod nodeipam;
mod quota;
mod replication;
mod sets_kit;
mod statefulsets;
mod volumes;
