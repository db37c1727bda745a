//! The providers of pattern 3 end to end: `setpoint server` with real kubectl — a
//! LoadBalancer Service's balancer (`lb.rs`), PostgreSQL Databases, Roles and Grants against a
//! real server (`postgres.rs`), certificates (`certs.rs`).

mod certs;
mod lb;
mod postgres;
