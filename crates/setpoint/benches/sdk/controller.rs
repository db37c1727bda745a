//! End-to-end controller benchmarks: N ConfigMaps (10,000) of 1 KiB reconciled by a no-op
//! reconciler (it counts the call and returns "await change"), timed from starting the
//! controller — so including its informer's first list and sync — to the Nth reconcile.
//! Setpoint's `Controller` and kube-runtime's, on the same server and objects, in-process and
//! over HTTPS.
//!
//! Memory: the heap after the last reconcile (once settled) minus the heap before the
//! controller was built — its cache, queue and everything else it keeps — and, as a check,
//! what stopping and dropping it frees.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use futures::future::BoxFuture;
use futures::StreamExt;
use http::Method;
use k8s_openapi::api::core::v1::ConfigMap;
use setpoint_runtime::{Action, Client, Controller, InformerFactory, InformerOptions, InitialList};
use tokio::sync::Notify;

use crate::heap::{self, Heap};
use crate::objects;
use crate::report::{self, Spread, Table, Verdict};
use crate::server::{Create, Server};
use crate::Settings;

/// The longest a run may take to reach its last reconcile.
const RUN_LIMIT: Duration = Duration::from_secs(300);
/// The target for Setpoint's controller, in-process.
const IN_PROCESS_TARGET: f64 = 20_000.0;

/// Counts reconciles and notes when the `target`th happened.
struct Counter {
    target: usize,
    count: AtomicUsize,
    first: OnceLock<Instant>,
    reached: OnceLock<Instant>,
    done: Notify,
}

impl Counter {
    fn new(target: usize) -> Arc<Counter> {
        Arc::new(Counter {
            target,
            count: AtomicUsize::new(0),
            first: OnceLock::new(),
            reached: OnceLock::new(),
            done: Notify::new(),
        })
    }

    fn hit(&self) {
        let n = self.count.fetch_add(1, Ordering::Relaxed) + 1;
        if n == 1 {
            let _ = self.first.set(Instant::now());
        }
        if n == self.target {
            let _ = self.reached.set(Instant::now());
            self.done.notify_one();
        }
    }
}

/// A reconcile error that never happens (both SDKs want an error type).
#[derive(Debug, thiserror::Error)]
#[error("never returned")]
struct Never;

async fn reconcile(_cm: Arc<ConfigMap>, counter: Arc<Counter>) -> Result<Action, Never> {
    counter.hit();
    Ok(Action::await_change())
}

async fn kube_reconcile(
    _cm: Arc<ConfigMap>,
    counter: Arc<Counter>,
) -> Result<kube::runtime::controller::Action, Never> {
    counter.hit();
    Ok(kube::runtime::controller::Action::await_change())
}

fn kube_error_policy(
    _cm: Arc<ConfigMap>,
    _error: &Never,
    _counter: Arc<Counter>,
) -> kube::runtime::controller::Action {
    kube::runtime::controller::Action::await_change()
}

/// Which controller runs.
#[derive(Clone, Copy, Debug)]
enum Sdk {
    /// Setpoint's, with this many workers, listing this way.
    Setpoint(usize, InitialList),
    /// Setpoint's with the compact cache form, this many workers, the default list.
    SetpointCompact(usize),
    /// kube-runtime's, with this concurrency limit (0: unbounded, its default).
    KubeRuntime(u16),
}

impl Sdk {
    fn describe(self) -> String {
        match self {
            Sdk::Setpoint(2, InitialList::Auto) => {
                "setpoint-runtime, concurrency 2 (default), streaming list (default)".into()
            }
            Sdk::Setpoint(n, InitialList::Auto) => {
                format!("setpoint-runtime, concurrency {n}, streaming list (default)")
            }
            Sdk::Setpoint(n, InitialList::List) => {
                format!("setpoint-runtime, concurrency {n}, paged list (500 per page)")
            }
            Sdk::Setpoint(n, InitialList::Stream) => {
                format!("setpoint-runtime, concurrency {n}, streaming list")
            }
            Sdk::SetpointCompact(n) => {
                format!("setpoint-runtime, concurrency {n}, streaming list (default), **compact cache**")
            }
            Sdk::KubeRuntime(0) => {
                "kube-runtime 5.0, unbounded concurrency (default), paged list (default, 500 per page)".into()
            }
            Sdk::KubeRuntime(n) => {
                format!("kube-runtime 5.0, concurrency {n}, paged list (default, 500 per page)")
            }
        }
    }
}

/// One controller run.
#[derive(Clone, Copy, Debug)]
struct Sample {
    /// Seconds from start to the last reconcile.
    elapsed: f64,
    /// Seconds from the first reconcile to the last.
    reconciling: f64,
    /// Seconds from start to the cache synced (Setpoint only).
    synced: Option<f64>,
    /// Reconciles counted by the time the heap was read.
    reconciles: usize,
    /// Heap after the last reconcile minus before.
    held: Heap,
    /// Heap after the last reconcile minus after stopping and dropping the controller.
    freed: Heap,
}

/// Stops a running controller and waits for it.
type Stop = Box<dyn FnOnce() -> BoxFuture<'static, Result<()>> + Send>;

async fn run(sdk: Sdk, client: &Client, n: usize) -> Result<Sample> {
    let counter = Counter::new(n);
    let before = heap::settled().await;
    let started = Instant::now();
    let (synced, stop): (Arc<OnceLock<Instant>>, Stop) = match sdk {
        Sdk::Setpoint(concurrency, _) | Sdk::SetpointCompact(concurrency) => {
            let options = match sdk {
                Sdk::Setpoint(_, initial_list) => InformerOptions {
                    initial_list,
                    ..InformerOptions::default()
                },
                _ => InformerOptions::default().compact(),
            };
            let factory = InformerFactory::new(client.clone());
            let controller = Controller::<ConfigMap>::new(&factory)
                .for_options(options.clone())
                .concurrency(concurrency);
            // The same shared informer the controller asks for (the first caller's options
            // count): to note when it syncs.
            let informer = factory.informer_with::<ConfigMap>(options);
            let synced = Arc::new(OnceLock::new());
            let synced_at = synced.clone();
            tokio::spawn(async move {
                informer.wait_until_synced().await;
                let _ = synced_at.set(Instant::now());
            });
            let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
            let task = tokio::spawn(controller.run(reconcile, counter.clone(), async {
                let _ = stopped.await;
            }));
            let stop: Stop = Box::new(move || {
                Box::pin(async move {
                    let _ = stop.send(());
                    task.await.context("the controller panicked")??;
                    factory.shut_down();
                    Ok::<(), anyhow::Error>(())
                })
            });
            (synced, stop)
        }
        Sdk::KubeRuntime(concurrency) => {
            let api = kube::Api::<ConfigMap>::all(client.kube().clone());
            let config = kube::runtime::controller::Config::default().concurrency(concurrency);
            let controller =
                kube::runtime::Controller::new(api, kube::runtime::watcher::Config::default())
                    .with_config(config);
            let task = tokio::spawn(
                controller
                    .run(kube_reconcile, kube_error_policy, counter.clone())
                    .for_each(|_| futures::future::ready(())),
            );
            let stop: Stop = Box::new(move || {
                Box::pin(async move {
                    task.abort();
                    let _ = task.await;
                    Ok::<(), anyhow::Error>(())
                })
            });
            (Arc::new(OnceLock::new()), stop)
        }
    };
    if tokio::time::timeout(RUN_LIMIT, counter.done.notified())
        .await
        .is_err()
    {
        bail!(
            "{}: {} of {n} reconciles in {RUN_LIMIT:?}",
            sdk.describe(),
            counter.count.load(Ordering::Relaxed)
        );
    }
    let reached = *counter.reached.get().context("the last reconcile's time")?;
    let first = *counter.first.get().context("the first reconcile's time")?;
    let after = heap::settled().await;
    let reconciles = counter.count.load(Ordering::Relaxed);
    stop().await?;
    let dropped = heap::settled().await;
    Ok(Sample {
        elapsed: (reached - started).as_secs_f64(),
        reconciling: (reached - first).as_secs_f64(),
        synced: synced.get().map(|t| (*t - started).as_secs_f64()),
        reconciles,
        held: after - before,
        freed: after - dropped,
    })
}

/// `controller`: Setpoint's controller at two concurrencies and kube-runtime's at its
/// default and at 2, each in-process and over HTTPS.
pub(crate) async fn controllers(settings: &Settings) -> Result<Table> {
    let n = 10_000;
    let server = Server::start().await?;
    let created = server
        .create_all((0..n).map(|i| {
            let (name, body) = objects::configmap(i);
            Create {
                name,
                path: "/api/v1/namespaces/default/configmaps".into(),
                body,
                then: None,
            }
        }))
        .await?;
    let (status, _) = server
        .call(
            Method::GET,
            "/api/v1/configmaps",
            "application/json",
            Vec::new(),
        )
        .await?;
    if created != n || !status.is_success() {
        bail!("created {created} of {n} ConfigMaps; warm-up list: {status}");
    }
    let in_process = server.in_process();
    let remote = server.remote().await?;
    let sdks = [
        Sdk::Setpoint(2, InitialList::Auto),
        Sdk::Setpoint(16, InitialList::Auto),
        Sdk::Setpoint(2, InitialList::List),
        Sdk::SetpointCompact(2),
        Sdk::KubeRuntime(0),
        Sdk::KubeRuntime(2),
    ];
    let mut variants = Vec::new();
    for transport in ["in-process", "remote (HTTPS)"] {
        for sdk in sdks {
            variants.push((transport, sdk));
        }
    }
    let mut samples = vec![Vec::new(); variants.len()];
    for round in 0..settings.runs {
        for (v, (transport, sdk)) in variants.iter().enumerate() {
            let client = if *transport == "in-process" {
                &in_process
            } else {
                &remote
            };
            let sample = run(*sdk, client, n).await?;
            println!(
                "controller round {round}: {transport} {}: {sample:?}",
                sdk.describe()
            );
            samples[v].push(sample);
        }
    }
    drop((in_process, remote));
    server.stop().await?;

    // kube-runtime's median rate over HTTPS at its default, for the remote target.
    let rate_of = |samples: &[Sample]| {
        Spread::of(
            &samples
                .iter()
                .map(|s| n as f64 / s.elapsed)
                .collect::<Vec<_>>(),
        )
    };
    let kube_remote = variants
        .iter()
        .zip(&samples)
        .find(|((t, sdk), _)| *t != "in-process" && matches!(sdk, Sdk::KubeRuntime(0)))
        .map(|(_, s)| rate_of(s).median)
        .unwrap_or(f64::NAN);

    let rows = variants
        .iter()
        .zip(&samples)
        .map(|((transport, sdk), samples)| {
            let rate = rate_of(samples);
            let reconciling = Spread::of(
                &samples
                    .iter()
                    .map(|s| n as f64 / s.reconciling.max(1e-9))
                    .collect::<Vec<_>>(),
            );
            let (target, verdict) = match (sdk, *transport == "in-process") {
                // The targets are the default configuration's; the compact cache trades
                // reconcile speed for memory.
                (Sdk::Setpoint(..), true) => (
                    format!("≥ {}", report::rate(IN_PROCESS_TARGET)),
                    Verdict::of(rate.median >= IN_PROCESS_TARGET).label(),
                ),
                (Sdk::Setpoint(..), false) => (
                    format!("≥ kube-runtime's ({})", report::rate(kube_remote)),
                    Verdict::of(rate.median >= kube_remote).label(),
                ),
                _ => (String::new(), ""),
            };
            let held = Spread::of(
                &samples
                    .iter()
                    .map(|s| s.held.bytes as f64)
                    .collect::<Vec<_>>(),
            );
            let freed = Spread::of(
                &samples
                    .iter()
                    .map(|s| s.freed.bytes as f64)
                    .collect::<Vec<_>>(),
            );
            if (freed.median - held.median).abs() > 0.02 * held.median {
                println!(
                    "warning: {transport} {}: counted {} held but stopping freed {}",
                    sdk.describe(),
                    report::mib(held.median),
                    report::mib(freed.median)
                );
            }
            let synced: Vec<f64> = samples.iter().filter_map(|s| s.synced).collect();
            let synced = if synced.is_empty() {
                "–".to_owned()
            } else {
                Spread::of(&synced).show(report::secs)
            };
            if let Some(s) = samples.iter().find(|s| s.reconciles != n) {
                println!(
                    "warning: {transport} {}: {} reconciles of {n} objects",
                    sdk.describe(),
                    s.reconciles
                );
            }
            vec![
                (*transport).to_owned(),
                sdk.describe(),
                rate.show(report::rate),
                reconciling.show(report::rate),
                synced,
                format!(
                    "{} ({} per object)",
                    held.show(report::mib),
                    report::bytes(held.median / n as f64)
                ),
                target,
                verdict.to_owned(),
            ]
        })
        .collect();
    Ok(Table {
        title: format!(
            "**controller**: {} ConfigMaps × 1 KiB of data, a no-op reconciler (counts the call, returns await-change); objects per second from starting the controller (so including its list and sync) to the {}th reconcile, and between the first and that last reconcile; heap the controller holds after the last reconcile (cache, queue and all):",
            report::int(n as f64),
            report::int(n as f64),
        ),
        header: vec![
            "transport",
            "controller",
            "objects/s, start → last reconcile",
            "objects/s, first → last reconcile",
            "cache synced after",
            "heap held",
            "target",
            "",
        ],
        rows,
    })
}
