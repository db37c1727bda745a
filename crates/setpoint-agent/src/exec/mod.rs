//! Running commands in a container's context, attaching to a container, and dialing a pod's
//! ports: the process side of the agent's `/exec`, `/attach` and `/portforward` routes (the
//! stream protocols are `streams/`'s).
//!
//! - [`target`]: the running container a request names, found from the pod's run records;
//! - [`helper`]: the `agent-shim exec` subcommand, a freshly started process that joins the
//!   container's cgroup, namespaces and user, sets up its terminal, and becomes the command;
//! - [`session`]: starting that helper with pipes or a pseudo-terminal and wiring it to a
//!   [`RemoteCommandSession`](crate::streams::RemoteCommandSession);
//! - [`pty`]: the pseudo-terminal pair and its asynchronous master;
//! - [`attach`]: a client of a shim's attach socket (`shim/attach.rs` serves it);
//! - [`dialer`]: connections to `localhost:<port>` inside the pod's network namespace.

pub(crate) mod attach;
pub(crate) mod dialer;
pub(crate) mod helper;
pub(crate) mod pty;
pub(crate) mod session;
pub(crate) mod target;
