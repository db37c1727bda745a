//! `setpoint server`'s `/metrics`: one Prometheus exposition for the whole process — the API
//! server's request, watch, store and audit log figures (kube-apiserver's names) and, for the loops it
//! runs, their controllers' and work queues' (controller-runtime's and kube-controller-
//! manager's names). Served by the API server on its own port, authenticated like any path.

use std::sync::Arc;

use setpoint_apiserver::telemetry::Histogram;
use setpoint_apiserver::Api;
use setpoint_runtime::{Encoder, Metrics};

/// Adds the API server's figures to `metrics` and has it answer `GET /metrics` with them all.
pub(crate) fn serve_with_api(metrics: &Metrics, api: &Arc<Api>) {
    let source = Arc::downgrade(api);
    metrics.add_source(move |e| {
        if let Some(api) = source.upgrade() {
            encode_api(e, &api);
        }
    });
    let render = metrics.clone();
    api.set_metrics_renderer(Arc::new(move || render.render()));
}

fn encode_api(e: &mut Encoder, api: &Api) {
    if let Some(audit) = api.audit_figures() {
        encode_audit(e, &audit);
    }
    encode_flow_control(e, api);
    let snapshot = api.telemetry();
    for (labels, code, n) in &snapshot.requests {
        let mut labels = labels.clone();
        labels.push(("code", code.to_string()));
        let pairs: Vec<(&str, &str)> = labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
        e.counter(
            "apiserver_request_total",
            "Counter of apiserver requests broken out for each verb, dry run value, group, version, resource, scope, component, and HTTP response code.",
            &pairs,
            *n,
        );
    }
    for (labels, histogram) in &snapshot.durations {
        let pairs: Vec<(&str, &str)> = labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
        histogram_of(
            e,
            "apiserver_request_duration_seconds",
            "Response latency distribution in seconds for each verb, dry run value, group, version, resource, subresource, scope and component.",
            &pairs,
            histogram,
        );
    }
    for (labels, open) in &snapshot.longrunning {
        let pairs: Vec<(&str, &str)> = labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
        e.gauge(
            "apiserver_longrunning_requests",
            "Gauge of all active long-running apiserver requests broken out by verb, group, version, resource, scope and component.",
            &pairs,
            *open as f64,
        );
    }
    for (operation, kind, histogram) in &snapshot.store {
        histogram_of(
            e,
            "etcd_request_duration_seconds",
            "Etcd request latency in seconds for each operation and object type.",
            &[("operation", operation), ("type", kind.as_str())],
            histogram,
        );
    }
    for (group, version, resource, n) in &snapshot.watch_events {
        e.counter(
            "apiserver_watch_events_total",
            "Number of events sent in watch clients",
            &[
                ("group", group),
                ("resource", resource),
                ("version", version),
            ],
            *n,
        );
    }
    for c in &snapshot.caches {
        let qualified = if c.group.is_empty() {
            c.resource.clone()
        } else {
            format!("{}.{}", c.resource, c.group)
        };
        e.gauge(
            "apiserver_storage_objects",
            "Number of stored objects at the time of last check split by kind.",
            &[("resource", &qualified)],
            c.objects as f64,
        );
        let labels = [
            ("group", c.group.as_str()),
            ("resource", c.resource.as_str()),
        ];
        e.gauge(
            "apiserver_watch_cache_capacity",
            "Total capacity of watch cache broken by resource type.",
            &labels,
            c.capacity as f64,
        );
        e.gauge(
            "setpoint_watch_cache_window_events",
            "Recent events held by the watch cache for watchers to resume from, broken by resource type.",
            &labels,
            c.events as f64,
        );
        e.counter(
            "apiserver_watch_cache_events_received_total",
            "Counter of events received in watch cache broken by resource type.",
            &labels,
            c.events_received,
        );
        for (held, bytes) in [("copy", c.own_bytes), ("stored", c.shared_bytes)] {
            e.gauge(
                "setpoint_watch_cache_object_bytes",
                "Bytes of JSON held for the watch cache's objects, broken by resource type: the stored bytes themselves (which the embedded store's index holds too), or served copies.",
                &[
                    ("group", c.group.as_str()),
                    ("resource", c.resource.as_str()),
                    ("held", held),
                ],
                bytes as f64,
            );
        }
        e.gauge(
            "apiserver_watch_cache_resource_version",
            "Current resource version of watch cache broken by resource type.",
            &labels,
            c.revision as f64,
        );
    }
}

/// The audit log's series (kube-apiserver's names; the log backend is its `log` plugin).
fn encode_audit(e: &mut Encoder, audit: &setpoint_apiserver::AuditFigures) {
    e.counter(
        "apiserver_audit_event_total",
        "Counter of audit events generated and sent to the audit backend.",
        &[],
        audit.events,
    );
    e.counter(
        "apiserver_audit_error_total",
        "Counter of audit events that failed to be audited properly. Plugin identifies the plugin affected by the error.",
        &[("plugin", "log")],
        audit.errors,
    );
    for (level, n) in &audit.levels {
        e.counter(
            "apiserver_audit_level_total",
            "Counter of policy levels for audit events (1 per request).",
            &[("level", level)],
            *n,
        );
    }
}

/// API Priority and Fairness' figures, under kube-apiserver's names.
fn encode_flow_control(e: &mut Encoder, api: &Api) {
    let figures = api.flow_control_figures();
    for (level, schema, n) in &figures.inqueue {
        e.gauge(
            "apiserver_flowcontrol_current_inqueue_requests",
            "Number of requests currently pending in queues of the API Priority and Fairness subsystem",
            &[("flow_schema", schema), ("priority_level", level)],
            *n as f64,
        );
    }
    for (level, schema, n) in &figures.executing {
        e.gauge(
            "apiserver_flowcontrol_current_executing_requests",
            "Number of requests in initial (for a WATCH) or any (for a non-WATCH) execution stage in the API Priority and Fairness subsystem",
            &[("flow_schema", schema), ("priority_level", level)],
            *n as f64,
        );
    }
    for (level, schema, reason, n) in &figures.rejected {
        e.counter(
            "apiserver_flowcontrol_rejected_requests_total",
            "Number of requests rejected by API Priority and Fairness subsystem",
            &[
                ("flow_schema", schema),
                ("priority_level", level),
                ("reason", reason),
            ],
            *n,
        );
    }
    for (level, schema, executed, h) in &figures.waits {
        let execute = if *executed { "true" } else { "false" };
        histogram_of(
            e,
            "apiserver_flowcontrol_request_wait_duration_seconds",
            "Length of time a request spent waiting in its queue",
            &[
                ("execute", execute),
                ("flow_schema", schema),
                ("priority_level", level),
            ],
            h,
        );
    }
    for (level, limit) in &figures.limits {
        e.gauge(
            "apiserver_flowcontrol_nominal_limit_seats",
            "Nominal number of execution seats configured for each priority level",
            &[("priority_level", level)],
            *limit as f64,
        );
    }
}

fn histogram_of(e: &mut Encoder, name: &str, help: &str, labels: &[(&str, &str)], h: &Histogram) {
    let cumulative: Vec<(f64, u64)> = h.cumulative().collect();
    e.histogram_buckets(name, help, labels, &cumulative, h.count, h.sum);
}
