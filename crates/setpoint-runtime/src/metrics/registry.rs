//! [`Metrics`]: the registry of metrics sources, read at scrape time.
//!
//! A source is a closure that writes samples into an [`Encoder`]; the typed `add_*` methods
//! wrap a closure returning a component's snapshot. Sources are called in the order they
//! were registered, on the scraping task, without any lock held, so a source may take its
//! component's lock (a queue's snapshot does) or even register further sources.

use std::fmt;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Arc;

use parking_lot::Mutex;

use super::components;
use super::encoder::Encoder;
use crate::{ControllerMetrics, InformerMetrics, QueueMetrics};

/// A source: writes its samples for one scrape.
type Source = Arc<dyn Fn(&mut Encoder) + Send + Sync>;

/// A registered source.
struct Entry {
    /// For a named registration, its component kind and name.
    name: Option<(Component, String)>,
    encode: Source,
}

/// What a named source describes; a name is unique per component kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Component {
    Queue,
    Controller,
    LeaderElection,
}

/// A registry of metrics sources, rendered together in the Prometheus text format. Cheap to
/// clone: clones share one registry.
///
/// Named registrations ([`add_queue`](Self::add_queue),
/// [`add_controller`](Self::add_controller),
/// [`add_leader_election`](Self::add_leader_election)) replace an earlier one of the same
/// kind and name, so a component restarted under its name is not counted twice; other
/// sources are only ever added. A series written twice anyway (two informer factories
/// watching one resource, two sources writing the same name and labels) is rendered once,
/// from the source registered first, and the duplicate is logged.
///
/// ```no_run
/// # async fn example() -> std::io::Result<()> {
/// use setpoint_runtime::{Metrics, WorkQueue};
///
/// let metrics = Metrics::new();
/// let queue = WorkQueue::<String>::new();
/// metrics.add_queue("configmaps", {
///     let queue = queue.clone();
///     move || queue.metrics()
/// });
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
/// tokio::spawn(metrics.clone().serve(listener, std::future::pending()));
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Default)]
pub struct Metrics {
    /// In registration order. Named entries are unique per (component, name).
    sources: Arc<Mutex<Vec<Entry>>>,
}

impl fmt::Debug for Metrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Metrics")
            .field("sources", &self.sources.lock().len())
            .finish()
    }
}

impl Metrics {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a source of any metrics: `encode` is called at every scrape and writes samples
    /// with the [`Encoder`]'s methods.
    pub fn add_source(&self, encode: impl Fn(&mut Encoder) + Send + Sync + 'static) {
        self.sources.lock().push(Entry {
            name: None,
            encode: Arc::new(encode),
        });
    }

    /// Adds the work queue `name`'s metrics (`workqueue_*{name, controller}`, both labels
    /// `name`, as controller-runtime names a controller's queue after the controller).
    /// `snapshot` is typically `move || queue.metrics()` on a clone of the queue.
    pub fn add_queue(
        &self,
        name: &str,
        snapshot: impl Fn() -> QueueMetrics + Send + Sync + 'static,
    ) {
        let label = name.to_owned();
        self.insert(Component::Queue, name, move |e| {
            components::encode_queue(e, &label, &snapshot());
        });
    }

    /// Adds the controller `name`'s metrics (`controller_runtime_*{controller}`).
    pub fn add_controller(
        &self,
        name: &str,
        snapshot: impl Fn() -> ControllerMetrics + Send + Sync + 'static,
    ) {
        let label = name.to_owned();
        self.insert(Component::Controller, name, move |e| {
            components::encode_controller(e, &label, &snapshot());
        });
    }

    /// Adds informers' metrics (`setpoint_informer_*{resource}`), one per `(resource label,
    /// metrics)` pair; typically `move || factory.metrics()` on a clone of an
    /// [`InformerFactory`](crate::InformerFactory).
    pub fn add_informers(
        &self,
        snapshot: impl Fn() -> Vec<(String, InformerMetrics)> + Send + Sync + 'static,
    ) {
        self.add_source(move |e| {
            for (resource, metrics) in snapshot() {
                components::encode_informer(e, &resource, &metrics);
            }
        });
    }

    /// Adds the leader election `name`'s status (`leader_election_master_status{name}`):
    /// `is_leading` returns whether this process holds the lease now.
    pub fn add_leader_election(
        &self,
        name: &str,
        is_leading: impl Fn() -> bool + Send + Sync + 'static,
    ) {
        let label = name.to_owned();
        self.insert(Component::LeaderElection, name, move |e| {
            components::encode_leader_election(e, &label, is_leading());
        });
    }

    /// Calls every source and renders what they write, in the text exposition format 0.0.4.
    /// A source that panics is logged and skipped; the others are rendered.
    pub fn render(&self) -> String {
        let sources: Vec<Source> = self
            .sources
            .lock()
            .iter()
            .map(|entry| Arc::clone(&entry.encode))
            .collect();
        let mut encoder = Encoder::new();
        for source in sources {
            let encoder = &mut encoder;
            if panic::catch_unwind(AssertUnwindSafe(|| source(encoder))).is_err() {
                tracing::error!("metrics: a source panicked; the samples it wrote before are kept");
            }
        }
        encoder.finish()
    }

    /// Registers a named source, replacing one of the same component and name in place.
    fn insert(
        &self,
        component: Component,
        name: &str,
        encode: impl Fn(&mut Encoder) + Send + Sync + 'static,
    ) {
        let encode: Source = Arc::new(encode);
        let mut sources = self.sources.lock();
        let existing = sources.iter_mut().find(|entry| {
            entry
                .name
                .as_ref()
                .is_some_and(|(c, n)| *c == component && n == name)
        });
        match existing {
            Some(entry) => entry.encode = encode,
            None => sources.push(Entry {
                name: Some((component, name.to_owned())),
                encode,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    use super::*;
    use crate::{Timing, WorkQueue};

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// The lines of `text` that are samples of `family` (histogram buckets left out).
    fn samples<'a>(text: &'a str, family: &str) -> Vec<&'a str> {
        text.lines()
            .filter(|line| {
                line.strip_prefix(family).is_some_and(|rest| {
                    rest.starts_with(['{', ' '])
                        || rest.starts_with("_sum")
                        || rest.starts_with("_count")
                })
            })
            .collect()
    }

    #[tokio::test(start_paused = true)]
    async fn render_should_show_a_work_queues_metrics_after_adds_and_claims() {
        let metrics = Metrics::new();
        let queue = WorkQueue::new();
        metrics.add_queue("pods", {
            let queue = queue.clone();
            move || queue.metrics()
        });
        queue.add("a");
        queue.add("b");
        queue.add("a"); // coalesced
        tokio::time::advance(ms(10)).await;
        let a = queue.next().await.expect("a key");
        tokio::time::advance(ms(30)).await;
        a.retry();
        let b = queue.next().await.expect("a key");
        tokio::time::advance(ms(2)).await;

        let text = metrics.render();
        let l = r#"{name="pods",controller="pods"}"#;
        assert_eq!(
            samples(&text, "workqueue_depth"),
            [format!("workqueue_depth{l} 0")]
        );
        assert_eq!(
            samples(&text, "workqueue_adds_total"),
            [format!("workqueue_adds_total{l} 2")]
        );
        assert_eq!(
            samples(&text, "workqueue_retries_total"),
            [format!("workqueue_retries_total{l} 1")]
        );
        assert_eq!(
            samples(&text, "setpoint_workqueue_delayed"),
            [format!("setpoint_workqueue_delayed{l} 1")]
        );
        assert_eq!(
            samples(&text, "workqueue_queue_duration_seconds"),
            [
                format!("workqueue_queue_duration_seconds_sum{l} 0.05"),
                format!("workqueue_queue_duration_seconds_count{l} 2"),
            ],
            "a waited 10 ms, b 40 ms"
        );
        let bucket = |le: &str| {
            format!("workqueue_queue_duration_seconds_bucket{{name=\"pods\",controller=\"pods\",le=\"{le}\"}}")
        };
        assert!(
            text.contains(&format!("\n{} 0\n", bucket("0.005"))),
            "{text}"
        );
        assert!(
            text.contains(&format!("\n{} 1\n", bucket("0.01"))),
            "{text}"
        );
        assert!(
            text.contains(&format!("\n{} 2\n", bucket("0.05"))),
            "{text}"
        );
        assert!(
            text.contains(&format!("\n{} 2\n", bucket("+Inf"))),
            "{text}"
        );
        assert_eq!(
            samples(&text, "workqueue_work_duration_seconds"),
            [
                format!("workqueue_work_duration_seconds_sum{l} 0.03"),
                format!("workqueue_work_duration_seconds_count{l} 1"),
            ]
        );
        assert_eq!(
            samples(&text, "workqueue_unfinished_work_seconds"),
            [format!("workqueue_unfinished_work_seconds{l} 0.002")]
        );
        assert_eq!(
            samples(&text, "workqueue_longest_running_processor_seconds"),
            [format!(
                "workqueue_longest_running_processor_seconds{l} 0.002"
            )]
        );
        b.done();
    }

    #[test]
    fn render_should_merge_families_across_queues_and_replace_a_reused_name() {
        let metrics = Metrics::new();
        let first = WorkQueue::new();
        first.add(1);
        let second = WorkQueue::new();
        second.add(1);
        second.add(2);
        metrics.add_queue("first", move || first.metrics());
        metrics.add_queue("second", move || second.metrics());
        metrics.add_queue("first", QueueMetrics::default); // replaces the first
        let text = metrics.render();
        assert_eq!(text.matches("# TYPE workqueue_depth gauge\n").count(), 1);
        assert_eq!(
            samples(&text, "workqueue_depth"),
            [
                r#"workqueue_depth{name="first",controller="first"} 0"#,
                r#"workqueue_depth{name="second",controller="second"} 2"#,
            ]
        );
    }

    #[test]
    fn render_should_write_controller_metrics_under_controller_runtimes_names() {
        let mut reconcile_duration = Timing::default();
        for d in [ms(3), ms(7), ms(200)] {
            reconcile_duration.record(d);
        }
        let snapshot = ControllerMetrics {
            reconcile_success_total: 5,
            reconcile_requeue_after_total: 2,
            reconcile_error_total: 3,
            reconcile_terminal_error_total: 1,
            reconcile_panics_total: 1,
            reconcile_timeouts_total: 2,
            reconcile_not_found_total: 4,
            reconcile_duration,
            active_workers: 1,
            max_concurrent_reconciles: 4,
        };
        let metrics = Metrics::new();
        metrics.add_controller("web", move || snapshot);
        let text = metrics.render();
        let without_buckets: String = text
            .lines()
            .filter(|line| !line.contains("_bucket{"))
            .map(|line| format!("{line}\n"))
            .collect();
        assert_eq!(
            without_buckets,
            r#"# HELP controller_runtime_reconcile_total Reconciles finished, by result (error includes panics and timeouts)
# TYPE controller_runtime_reconcile_total counter
controller_runtime_reconcile_total{controller="web",result="success"} 5
controller_runtime_reconcile_total{controller="web",result="error"} 6
controller_runtime_reconcile_total{controller="web",result="requeue_after"} 2
# HELP controller_runtime_reconcile_errors_total Reconciles that ended in an error, a panic or a timeout
# TYPE controller_runtime_reconcile_errors_total counter
controller_runtime_reconcile_errors_total{controller="web"} 6
# HELP controller_runtime_terminal_reconcile_errors_total Reconciles that ended in an error marked terminal (not retried)
# TYPE controller_runtime_terminal_reconcile_errors_total counter
controller_runtime_terminal_reconcile_errors_total{controller="web"} 1
# HELP controller_runtime_reconcile_panics_total Reconciles that panicked
# TYPE controller_runtime_reconcile_panics_total counter
controller_runtime_reconcile_panics_total{controller="web"} 1
# HELP controller_runtime_reconcile_timeouts_total Reconciles cancelled by the reconcile timeout
# TYPE controller_runtime_reconcile_timeouts_total counter
controller_runtime_reconcile_timeouts_total{controller="web"} 2
# HELP controller_runtime_reconcile_time_seconds How long reconciles took
# TYPE controller_runtime_reconcile_time_seconds histogram
controller_runtime_reconcile_time_seconds_sum{controller="web"} 0.21
controller_runtime_reconcile_time_seconds_count{controller="web"} 3
# HELP controller_runtime_active_workers Reconciles running now
# TYPE controller_runtime_active_workers gauge
controller_runtime_active_workers{controller="web"} 1
# HELP controller_runtime_max_concurrent_reconciles How many reconciles the controller runs at most at once
# TYPE controller_runtime_max_concurrent_reconciles gauge
controller_runtime_max_concurrent_reconciles{controller="web"} 4
# HELP setpoint_controller_not_found_total Keys taken from the queue whose object was gone from the cache, so no reconcile ran
# TYPE setpoint_controller_not_found_total counter
setpoint_controller_not_found_total{controller="web"} 4
"#
        );
        for (le, n) in [
            ("0.0025", 0),
            ("0.005", 1),
            ("0.01", 2),
            ("0.1", 2),
            ("0.25", 3),
            ("+Inf", 3),
        ] {
            let line = format!(
                "\ncontroller_runtime_reconcile_time_seconds_bucket{{controller=\"web\",le=\"{le}\"}} {n}\n"
            );
            assert!(text.contains(&line), "{line} in {text}");
        }
    }

    #[test]
    fn render_should_write_every_informers_metrics_labelled_by_resource() {
        let metrics = Metrics::new();
        metrics.add_informers(|| {
            vec![
                (
                    "configmaps".to_owned(),
                    InformerMetrics {
                        lists_total: 2,
                        relists_total: 1,
                        watches_total: 5,
                        watch_restarts_total: 4,
                        watch_errors_total: 3,
                        events_total: 40,
                        objects: 12,
                        synced: true,
                    },
                ),
                ("pods".to_owned(), InformerMetrics::default()),
            ]
        });
        let text = metrics.render();
        let expected = [
            ("setpoint_informer_lists_total", "counter", 2, 0),
            ("setpoint_informer_relists_total", "counter", 1, 0),
            ("setpoint_informer_watches_total", "counter", 5, 0),
            ("setpoint_informer_watch_restarts_total", "counter", 4, 0),
            ("setpoint_informer_watch_errors_total", "counter", 3, 0),
            ("setpoint_informer_events_total", "counter", 40, 0),
            ("setpoint_informer_objects", "gauge", 12, 0),
            ("setpoint_informer_synced", "gauge", 1, 0),
        ];
        for (name, kind, configmaps, pods) in expected {
            assert!(
                text.contains(&format!("# TYPE {name} {kind}\n")),
                "{name} in {text}"
            );
            assert_eq!(
                samples(&text, name),
                [
                    format!("{name}{{resource=\"configmaps\"}} {configmaps}"),
                    format!("{name}{{resource=\"pods\"}} {pods}"),
                ]
            );
        }
        assert_eq!(text.matches("# TYPE ").count(), expected.len());
    }

    #[test]
    fn render_should_read_leader_status_at_each_scrape() {
        let leading = Arc::new(AtomicBool::new(false));
        let metrics = Metrics::new();
        metrics.add_leader_election("setpoint-controllers", {
            let leading = Arc::clone(&leading);
            move || leading.load(Ordering::SeqCst)
        });
        let status = |text: &str| samples(text, "leader_election_master_status").concat();
        assert_eq!(
            status(&metrics.render()),
            r#"leader_election_master_status{name="setpoint-controllers"} 0"#
        );
        leading.store(true, Ordering::SeqCst);
        assert_eq!(
            status(&metrics.render()),
            r#"leader_election_master_status{name="setpoint-controllers"} 1"#
        );
    }

    #[test]
    fn a_source_may_register_another_source_while_rendering() {
        let metrics = Metrics::new();
        let registry = metrics.clone();
        metrics.add_source(move |e| {
            e.gauge("outer", "Outer.", &[], 1.0);
            registry.add_source(|e| e.gauge("inner", "Inner.", &[], 2.0));
        });
        let first = metrics.render();
        assert!(
            first.contains("\nouter 1\n") && !first.contains("inner"),
            "{first}"
        );
        assert!(
            metrics.render().contains("\ninner 2\n"),
            "registered for the next scrape"
        );
    }

    #[test]
    fn a_panicking_source_should_not_stop_the_others() {
        let metrics = Metrics::new();
        metrics.add_source(|e| {
            e.gauge("before", "Before.", &[], 1.0);
            panic!("a broken source");
        });
        metrics.add_leader_election("lock", || false);
        let text = metrics.render();
        assert!(text.contains("\nbefore 1\n"), "{text}");
        assert!(
            text.contains("\nleader_election_master_status{name=\"lock\"} 0\n"),
            "{text}"
        );
    }

    #[test]
    fn an_empty_registry_should_render_nothing() {
        assert_eq!(Metrics::new().render(), "");
    }
}
