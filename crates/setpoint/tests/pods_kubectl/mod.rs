//! Pods of issue 18 driven by the real `kubectl` (and client libraries) against a
//! `setpoint server` process with real process pods on the local agent: exec, attach, cp and
//! port-forward streams, pod networking, Services, DNS and limits.

mod kit;
mod limits;
mod networking;
mod services;
mod streams;
