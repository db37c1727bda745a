//! Informer benchmarks: how much heap an informer's cache takes per object, and how long its
//! first list takes.
//!
//! - `informer`: N ConfigMaps of 1 KiB data (100,000; `--quick`: 10,000), cached by a
//!   `SharedInformer<ConfigMap>` in-process and over HTTPS, with a paged list (500 per page)
//!   and with a streaming list (`sendInitialEvents`).
//! - `pods`: N realistic Pods (10,000; `--quick`: 2,000) cached whole, whole without
//!   `managedFields` (the strip transform), and as metadata only — each decoded (the default
//!   cache form) and, for whole Pods, compact (`InformerOptions::compact`).
//!
//! Each run: settle the heap, start a fresh factory and informer, time it to synced (sampling
//! the heap's peak meanwhile), settle, read the heap again; for `pods`, time reads (one whole
//! `list`, a `get` of every key in turn, repeated `get`s of the last 64 keys) and read the heap
//! once more; then shut the factory down, drop it, settle, read once more. "Cached" is
//! after-sync minus before; "freed" is the last reading before the drop minus after-drop;
//! both are divided by the number of cached objects.

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use bytes::Bytes;
use http::{Method, Request, Response};
use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::PartialObjectMeta;
use kube::Resource;
use serde::de::DeserializeOwned;
use serde_json::Value;
use setpoint_apiserver::{full_body, Api};
use setpoint_runtime::{
    Client, InformerFactory, InformerOptions, InitialList, ObjectCache, ObjectKey,
};

use crate::heap::{self, Heap, PeakSampler};
use crate::objects;
use crate::report::{self, Spread, Table, Verdict};
use crate::server::{Call, Create, Server};
use crate::Settings;

/// The longest an informer may take to sync before the run fails.
const SYNC_LIMIT: Duration = Duration::from_secs(300);
/// The target for a cached Pod.
const POD_TARGET_BYTES: f64 = 8_000.0;

/// One informer run.
#[derive(Clone, Copy, Debug)]
struct Sample {
    /// Seconds from starting the informer to synced.
    sync: f64,
    /// Objects in the cache once synced.
    len: usize,
    /// Heap after sync minus before.
    cached: Heap,
    /// Heap after sync minus after dropping the informer.
    freed: Heap,
    /// Highest heap during the sync minus before.
    peak: i64,
    /// Read costs, if measured.
    reads: Option<Reads>,
}

/// What reading a synced cache costs.
#[derive(Clone, Copy, Debug)]
struct Reads {
    /// Nanoseconds per object of one whole `list()`.
    list: f64,
    /// Nanoseconds per `get` of each key in turn, once (compact: none recently read).
    cold: f64,
    /// Nanoseconds per `get` of the same 64 keys, again and again.
    warm: f64,
    /// Heap once settled after the reads, minus before the informer (with what reads keep
    /// decoded).
    heap: Heap,
}

/// Keys read again and again for the warm `get` figure (fewer than a compact cache keeps).
const WARM_KEYS: usize = 64;
/// Rounds over the warm keys.
const WARM_ROUNDS: usize = 200;

/// Times reads of `store`; see [`Reads`] (`heap` is left for the caller to fill in).
fn reads<K: Resource>(store: &ObjectCache<K>) -> Reads {
    let started = Instant::now();
    let all = store.list();
    let list = started.elapsed().as_nanos() as f64 / all.len().max(1) as f64;
    let keys: Vec<ObjectKey> = all.iter().map(|o| ObjectKey::of(o.as_ref())).collect();
    drop(all);
    let started = Instant::now();
    let mut found = 0usize;
    for key in &keys {
        found += usize::from(store.get(key).is_some());
    }
    let cold = started.elapsed().as_nanos() as f64 / keys.len().max(1) as f64;
    let hot = &keys[keys.len().saturating_sub(WARM_KEYS)..];
    let started = Instant::now();
    for _ in 0..WARM_ROUNDS {
        for key in hot {
            found += usize::from(store.get(key).is_some());
        }
    }
    let warm = started.elapsed().as_nanos() as f64 / (WARM_ROUNDS * hot.len()).max(1) as f64;
    assert_eq!(
        found,
        keys.len() + WARM_ROUNDS * hot.len(),
        "every key read"
    );
    Reads {
        list,
        cold,
        warm,
        heap: Heap {
            bytes: 0,
            allocations: 0,
        },
    }
}

/// Caches `options`' objects once with `client` (and times reads, if `time_reads`); see the
/// module docs.
async fn run<K>(client: &Client, options: InformerOptions<K>, time_reads: bool) -> Result<Sample>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default,
{
    let before = heap::settled().await;
    let sampler = PeakSampler::start();
    let started = Instant::now();
    let factory = InformerFactory::new(client.clone());
    let informer = factory.informer_with::<K>(options);
    factory.start();
    if tokio::time::timeout(SYNC_LIMIT, informer.wait_until_synced())
        .await
        .is_err()
    {
        bail!(
            "the informer did not sync in {SYNC_LIMIT:?}: {:?}",
            informer.last_error()
        );
    }
    let sync = started.elapsed().as_secs_f64();
    let peak = sampler.stop();
    let len = informer.store().len();
    let after = heap::settled().await;
    let mut reads = time_reads.then(|| reads(&informer.store()));
    let last = heap::settled().await;
    if let Some(reads) = &mut reads {
        reads.heap = last - before;
    }
    factory.shut_down();
    drop(informer);
    drop(factory);
    let dropped = heap::settled().await;
    Ok(Sample {
        sync,
        len,
        cached: after - before,
        freed: last - dropped,
        peak: peak - before.bytes,
        reads,
    })
}

/// The heap of one object decoded on its own, for comparison with the cache's.
#[derive(Clone, Copy, Debug)]
struct Decoded {
    /// Heap bytes, the struct included.
    bytes: f64,
    /// `size_of` the struct.
    inline: usize,
}

/// What the runs of one variant give: medians and spreads.
struct Figures {
    /// Cached bytes per object.
    cached: Spread,
    /// Live allocations per cached object.
    allocations: Spread,
    /// Seconds to synced.
    sync: Spread,
    /// Peak heap over the baseline during the sync, in bytes.
    peak: Spread,
    /// Read costs, if measured: ns per listed object, per cold and per warm `get`, and
    /// bytes per object held after the reads.
    reads: Option<[Spread; 4]>,
}

impl Figures {
    /// The figures of `samples`; warns when what dropping the informer freed disagrees with
    /// what it was counted to hold (something else changed the heap meanwhile).
    fn of(variant: &str, samples: &[Sample]) -> Figures {
        let per = |f: fn(&Sample) -> i64| -> Vec<f64> {
            samples
                .iter()
                .map(|s| f(s) as f64 / s.len.max(1) as f64)
                .collect()
        };
        let cached = Spread::of(&per(|s| s.cached.bytes));
        let held = Spread::of(&per(|s| s.reads.map_or(s.cached, |r| r.heap).bytes));
        let freed = Spread::of(&per(|s| s.freed.bytes));
        if (freed.median - held.median).abs() > 0.02 * held.median {
            println!(
                "warning: {variant}: counted {} per object before the drop but dropping freed {}",
                report::bytes(held.median),
                report::bytes(freed.median)
            );
        }
        Figures {
            cached,
            allocations: Spread::of(&per(|s| s.cached.allocations)),
            sync: Spread::of(&samples.iter().map(|s| s.sync).collect::<Vec<_>>()),
            peak: Spread::of(&samples.iter().map(|s| s.peak as f64).collect::<Vec<_>>()),
            reads: samples.iter().all(|s| s.reads.is_some()).then(|| {
                let of = |f: fn(&Reads) -> f64| {
                    Spread::of(
                        &samples
                            .iter()
                            .filter_map(|s| s.reads.as_ref().map(f))
                            .collect::<Vec<_>>(),
                    )
                };
                [
                    of(|r| r.list),
                    of(|r| r.cold),
                    of(|r| r.warm),
                    Spread::of(&per(|s| s.reads.map_or(0, |r| r.heap.bytes))),
                ]
            }),
        }
    }
}

/// `informer`: ConfigMaps of 1 KiB, in-process and remote, paged and streaming lists.
pub(crate) async fn configmaps(settings: &Settings) -> Result<Table> {
    let n = if settings.quick { 10_000 } else { 100_000 };
    let server = Server::start().await?;
    let started = Instant::now();
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
    println!(
        "informer: created {} ConfigMaps in {:.1} s",
        report::int(created as f64),
        started.elapsed().as_secs_f64()
    );
    let json = served(&server, "configmaps", &objects::configmap_name(0), None).await?;
    let json_bytes = json.len();
    let decoded = Decoded {
        bytes: decoded_bytes::<ConfigMap>(&json, |o| o)?,
        inline: std::mem::size_of::<ConfigMap>(),
    };
    warm_up(&server, "configmaps").await?;

    let in_process = server.in_process();
    let remote = server.remote().await?;
    let variants = [
        ("in-process", &in_process, InitialList::List, false),
        ("in-process", &in_process, InitialList::Stream, false),
        ("in-process", &in_process, InitialList::Stream, true),
        ("remote (HTTPS)", &remote, InitialList::List, false),
        ("remote (HTTPS)", &remote, InitialList::Stream, false),
    ];
    let mut samples = vec![Vec::new(); variants.len()];
    for round in 0..settings.runs {
        for (v, (transport, client, list, compact)) in variants.iter().enumerate() {
            let mut options = InformerOptions::<ConfigMap> {
                initial_list: *list,
                ..InformerOptions::default()
            };
            if *compact {
                options = options.compact();
            }
            let sample = run(client, options, false).await?;
            if sample.len != n {
                bail!(
                    "{transport}: cached {} ConfigMaps, expected {n}",
                    sample.len
                );
            }
            println!("informer round {round}: {transport} {list:?} compact {compact}: {sample:?}");
            samples[v].push(sample);
        }
    }
    let rows = variants
        .iter()
        .zip(&samples)
        .map(|((transport, _, list, compact), samples)| {
            let f = Figures::of(&format!("{transport} {list:?} compact {compact}"), samples);
            let list = list_name(*list);
            vec![
                (*transport).to_owned(),
                if *compact {
                    format!("{list}, **compact cache**")
                } else {
                    list.to_owned()
                },
                f.cached.show(report::bytes),
                format!("{:.2}×", f.cached.median / json_bytes as f64),
                format!("{:.1}", f.allocations.median),
                f.sync.show(report::secs),
                f.peak.show(report::mib),
            ]
        })
        .collect();
    let table = Table {
        title: format!(
            "**informer**: {} ConfigMaps × 1 KiB of data ({} B of JSON each as served; one decoded on its own: {} on the heap, {} B of it the struct itself), cached by a `SharedInformer<ConfigMap>`; heap per cached object once synced, and time from start to synced:",
            report::int(n as f64),
            report::int(json_bytes as f64),
            report::bytes(decoded.bytes),
            report::int(decoded.inline as f64),
        ),
        header: vec![
            "transport",
            "initial list",
            "heap per cached object",
            "× JSON",
            "allocations per object",
            "time to synced",
            "peak heap during sync (over baseline)",
        ],
        rows,
    };
    drop(in_process);
    drop(remote);
    server.stop().await?;
    Ok(table)
}

fn list_name(list: InitialList) -> &'static str {
    match list {
        InitialList::List => "paged list (500 per page)",
        InitialList::Stream => "streaming list (sendInitialEvents)",
        InitialList::Auto => "default list (streaming if offered)",
    }
}

/// `pods`: realistic Pods, whole, stripped of `managedFields`, and metadata only.
pub(crate) async fn pods(settings: &Settings) -> Result<Table> {
    let n = if settings.quick { 2_000 } else { 10_000 };
    let server = Server::start().await?;
    let started = Instant::now();
    let created = server
        .create_all((0..n).map(|i| {
            let (name, body) = objects::pod(i);
            let then = Call {
                method: Method::PATCH,
                path: format!("/api/v1/namespaces/default/pods/{name}/status"),
                content_type: "application/merge-patch+json",
                body: objects::pod_status_patch(i),
            };
            Create {
                name,
                path: "/api/v1/namespaces/default/pods".into(),
                body,
                then: Some(then),
            }
        }))
        .await?;
    println!(
        "pods: created {} Pods (and their status) in {:.1} s",
        report::int(created as f64),
        started.elapsed().as_secs_f64()
    );
    let fields: Arc<HashMap<String, Value>> = Arc::new(
        (0..n)
            .map(|i| (objects::pod_name(i), objects::pod_managed_fields(i)))
            .collect(),
    );
    let name0 = objects::pod_name(0);
    let json = served(&server, "pods", &name0, fields.get(&name0)).await?;
    let served_bytes = json.len();
    let without = served(&server, "pods", &name0, None).await?.len();
    let pod_inline = std::mem::size_of::<Pod>();
    let meta_inline = std::mem::size_of::<PartialObjectMeta<Pod>>();
    let decoded = [
        Decoded {
            bytes: decoded_bytes::<Pod>(&json, |o| o)?,
            inline: pod_inline,
        },
        Decoded {
            bytes: decoded_bytes::<Pod>(&json, strip)?,
            inline: pod_inline,
        },
        Decoded {
            bytes: decoded_bytes::<PartialObjectMeta<Pod>>(&json, |o| o)?,
            inline: meta_inline,
        },
        Decoded {
            bytes: decoded_bytes::<PartialObjectMeta<Pod>>(&json, strip)?,
            inline: meta_inline,
        },
    ];
    warm_up(&server, "pods").await?;
    let client = with_managed_fields(server.api.clone(), fields.clone());

    let list = |o: InformerOptions<Pod>| InformerOptions {
        initial_list: InitialList::List,
        ..o
    };
    let meta_list = |o: InformerOptions<PartialObjectMeta<Pod>>| InformerOptions {
        initial_list: InitialList::List,
        ..o
    };
    let compact_size = |transform: fn(Pod) -> Pod| -> Result<f64> {
        let pod = transform(serde_json::from_slice::<Pod>(&json)?);
        let encoded = serde_json::to_vec(&pod)?;
        Ok(lz4_flex::block::compress_prepend_size(&encoded).len() as f64)
    };
    let compact = [
        Decoded {
            bytes: compact_size(|o| o)?,
            inline: 0,
        },
        Decoded {
            bytes: compact_size(strip)?,
            inline: 0,
        },
    ];
    let names = [
        "Pod, as served (with managedFields)",
        "Pod, transform stripping managedFields",
        "Pod, **compact**, as served",
        "Pod, **compact**, transform stripping managedFields",
        "metadata only (PartialObjectMetadata), as served",
        "metadata only, transform stripping managedFields",
    ];
    let mut samples = vec![Vec::new(); names.len()];
    for round in 0..settings.runs {
        for (v, name) in names.iter().enumerate() {
            let whole = InformerOptions::default();
            let sample = match v {
                0 => run(&client, list(whole), true).await?,
                1 => run(&client, list(whole.strip_managed_fields()), true).await?,
                2 => run(&client, list(whole.compact()), true).await?,
                3 => run(&client, list(whole.strip_managed_fields().compact()), true).await?,
                4 => run(&client, meta_list(InformerOptions::default()), true).await?,
                _ => {
                    run(
                        &client,
                        meta_list(InformerOptions::default().strip_managed_fields()),
                        true,
                    )
                    .await?
                }
            };
            if sample.len != n {
                bail!("{name}: cached {} Pods, expected {n}", sample.len);
            }
            println!("pods round {round}: {name}: {sample:?}");
            samples[v].push(sample);
        }
    }
    let one = [
        decoded[0], decoded[1], compact[0], compact[1], decoded[2], decoded[3],
    ];
    let rows = names
        .iter()
        .zip(&samples)
        .zip(&one)
        .enumerate()
        .map(|(v, ((name, samples), one))| {
            let f = Figures::of(name, samples);
            let (target, verdict) = if v < 4 {
                (
                    format!("≤ {}", report::bytes(POD_TARGET_BYTES)),
                    Verdict::of(f.cached.median <= POD_TARGET_BYTES).label(),
                )
            } else {
                (String::new(), "")
            };
            let one = if v == 2 || v == 3 {
                format!("{} compressed JSON", report::bytes(one.bytes))
            } else {
                format!(
                    "{} ({} inline)",
                    report::bytes(one.bytes),
                    report::bytes(one.inline as f64)
                )
            };
            let [list_ns, cold, warm, held] = f.reads.unwrap_or([Spread::of(&[]); 4]);
            vec![
                (*name).to_owned(),
                f.cached.show(report::bytes),
                one,
                format!("{:.0}", f.allocations.median),
                f.sync.show(report::secs),
                f.peak.show(report::mib),
                cold.show(report::nanos),
                warm.show(report::nanos),
                list_ns.show(report::nanos),
                held.show(report::bytes),
                target,
                verdict.to_owned(),
            ]
        })
        .collect();
    drop(client);
    server.stop().await?;
    Ok(Table {
        title: format!(
            "**pods**: {} Pods as a Deployment's ReplicaSet creates them and the kubelet reports them ({} B of JSON as kube-apiserver would serve one, with its two managedFields entries; {} B without them), cached in-process from a paged list. Time to synced and peak heap include this benchmark's re-encoding of each listed page to add the managedFields. Reads after the sync: `get` of every key once (cold), `get` of the same 64 keys 200 times (warm), one whole `list()`:",
            report::int(n as f64),
            report::int(served_bytes as f64),
            report::int(without as f64),
        ),
        header: vec![
            "cache",
            "heap per cached Pod",
            "one decoded on its own",
            "allocations per Pod",
            "time to synced",
            "peak heap during sync (over baseline)",
            "get, cold",
            "get, warm",
            "list, per Pod",
            "heap per Pod after the reads",
            "target",
            "",
        ],
        rows,
    })
}

/// One object's JSON as the server serves it (with `managed_fields` added, if given).
async fn served(
    server: &Server,
    plural: &str,
    name: &str,
    managed_fields: Option<&Value>,
) -> Result<Vec<u8>> {
    let path = format!("/api/v1/namespaces/default/{plural}/{name}");
    let (status, body) = server
        .call(Method::GET, &path, "application/json", Vec::new())
        .await?;
    if !status.is_success() {
        bail!("GET {path}: {status}");
    }
    let Some(fields) = managed_fields else {
        return Ok(body.to_vec());
    };
    let mut object: Value = serde_json::from_slice(&body).context("decoding a served object")?;
    object["metadata"]["managedFields"] = fields.clone();
    Ok(serde_json::to_vec(&object)?)
}

/// Copies decoded at once to measure one.
const DECODE_COPIES: usize = 200;

/// The heap one object takes decoded from `json` and passed through `transform`, on its own
/// (the average of [`DECODE_COPIES`] held at once), its struct included (`size_of::<K>()`
/// bytes of it are inline, in the cache's `Arc`).
fn decoded_bytes<K: DeserializeOwned>(json: &[u8], transform: impl Fn(K) -> K) -> Result<f64> {
    let before = heap::now();
    let mut held = Vec::with_capacity(DECODE_COPIES);
    for _ in 0..DECODE_COPIES {
        held.push(transform(
            serde_json::from_slice::<K>(json).context("decoding a served object")?,
        ));
    }
    let after = heap::now();
    drop(held);
    Ok((after.bytes - before.bytes) as f64 / DECODE_COPIES as f64)
}

/// Drops `metadata.managedFields`.
fn strip<K: Resource>(mut object: K) -> K {
    object.meta_mut().managed_fields = None;
    object
}

/// One whole list of `plural` before measuring, so that anything the server builds on a
/// first list is in every run's baseline.
async fn warm_up(server: &Server, plural: &str) -> Result<()> {
    let path = format!("/api/v1/{plural}");
    let (status, _) = server
        .call(Method::GET, &path, "application/json", Vec::new())
        .await?;
    if !status.is_success() {
        bail!("GET {path}: {status}");
    }
    Ok(())
}

/// An in-process client whose Pod lists carry the `managedFields` kube-apiserver would
/// record (from `fields`, by Pod name): Setpoint's server drops managed fields, and a Pod
/// cache on a real cluster holds them. Watches are passed through untouched, so informers
/// using this must list (not stream) to see the fields.
fn with_managed_fields(api: Arc<Api>, fields: Arc<HashMap<String, Value>>) -> Client {
    Client::in_process(move |request: Request<Bytes>| {
        let api = api.clone();
        let fields = fields.clone();
        async move {
            let is_pod_list = request.method() == Method::GET
                && request.uri().path().ends_with("/pods")
                && !request.uri().query().unwrap_or("").contains("watch=");
            let response = api.handle(request).await;
            if !is_pod_list || !response.status().is_success() {
                return response;
            }
            let (mut parts, body) = response.into_parts();
            let out = match body.collect().await {
                Ok(collected) => {
                    let bytes = collected.to_bytes();
                    add_managed_fields(&bytes, &fields).unwrap_or_else(|| bytes.to_vec())
                }
                Err(e) => {
                    parts.status = http::StatusCode::INTERNAL_SERVER_ERROR;
                    e.to_string().into_bytes()
                }
            };
            parts.headers.remove(http::header::CONTENT_LENGTH);
            Response::from_parts(parts, full_body(out))
        }
    })
}

/// The list `body` with each item's `metadata.managedFields` from `fields`.
fn add_managed_fields(body: &[u8], fields: &HashMap<String, Value>) -> Option<Vec<u8>> {
    let mut list: Value = serde_json::from_slice(body).ok()?;
    for item in list.get_mut("items")?.as_array_mut()? {
        let meta = item.get_mut("metadata")?.as_object_mut()?;
        let name = meta.get("name")?.as_str()?.to_owned();
        if let Some(f) = fields.get(&name) {
            meta.insert("managedFields".into(), f.clone());
        }
    }
    serde_json::to_vec(&list).ok()
}
