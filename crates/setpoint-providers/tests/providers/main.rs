//! The providers' loops against an in-process API server (`setpoint-testenv`): the load
//! balancer (`lb.rs`), PostgreSQL (`postgres.rs`), certificates (`certs.rs`). One binary.

mod certs;
mod lb;
mod postgres;
