//! Crash test of the API server as a client sees it: 16 concurrent writers create ConfigMaps
//! over HTTPS (the `kube` client, trusting the CA of the server's kubeconfig), and the server is
//! killed with SIGKILL at a random moment mid-load, then restarted on the same data directory,
//! over several rounds. After each restart:
//!
//! - every ConfigMap whose create was answered `201 Created` exists, with the uid and
//!   resourceVersion that answer carried, and its data;
//! - every ConfigMap of the test that exists (acknowledged or caught in flight) holds exactly the
//!   data it was created with;
//! - the list's resourceVersion is at least every object's, and writes after the restart get
//!   resourceVersions greater than every one handed out before it.
//!
//! Randomness (the kill delays) is seeded: the seed is printed, and `SETPOINT_SEED=<seed>`
//! replays the choices (not the timing).

use crate::common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::Server;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, ObjectMeta, PostParams};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// Kill-restart-check rounds.
const ROUNDS: usize = 5;
/// After this many rounds, no new round starts once `TIME_LIMIT` has passed.
const MIN_ROUNDS: usize = 3;
/// Keeps the test's time bounded on slow machines.
const TIME_LIMIT: Duration = Duration::from_secs(35);
/// Concurrent creating clients.
const WRITERS: usize = 16;
/// How long after the load starts the server is killed, in milliseconds.
const KILL_AFTER_MS: std::ops::RangeInclusive<u64> = 200..=1500;
/// A writer that has not seen the kill after this long gives up (the test then fails).
const WRITER_LIMIT: Duration = Duration::from_secs(30);
const NAMESPACE: &str = "default";
/// Every ConfigMap this test creates is named with this prefix.
const PREFIX: &str = "crash-";

/// What a `201 Created` answer said about a ConfigMap.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Acked {
    uid: String,
    resource_version: u64,
}

/// What one writer saw before the kill ended its load.
struct WriterReport {
    acked: Vec<(String, Acked)>,
    /// Why the writer stopped, if not because the server was killed.
    failure: Option<String>,
}

#[test]
fn creates_acknowledged_with_201_should_survive_kill_9_of_the_server() {
    let seed = std::env::var("SETPOINT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64)
        });
    eprintln!("api_crash: seed {seed} (replay with SETPOINT_SEED={seed})");
    let mut rng = SmallRng::seed_from_u64(seed);
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let dir = tmp.path().join("data");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");

    let mut model: BTreeMap<String, Acked> = BTreeMap::new();
    let mut server = Server::start_in(&dir);
    let mut highest_before = 0;
    let started = Instant::now();
    for round in 0..ROUNDS {
        if round >= MIN_ROUNDS && started.elapsed() > TIME_LIMIT {
            break;
        }
        let client = runtime.block_on(server.kube_client());
        let delay = Duration::from_millis(rng.gen_range(KILL_AFTER_MS));
        let killed = Arc::new(AtomicBool::new(false));
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| runtime.spawn(writer(client.clone(), round, w, killed.clone())))
            .collect();
        std::thread::sleep(delay);
        killed.store(true, Ordering::SeqCst);
        server.kill();
        let reports = runtime
            .block_on(async {
                tokio::time::timeout(WRITER_LIMIT, futures::future::join_all(writers)).await
            })
            .expect("the writers stop once the server is killed");
        let mut acked_this_round = 0;
        for report in reports {
            let report = report.expect("a writer task does not panic");
            if let Some(failure) = report.failure {
                panic!("round {round} (seed {seed}): {failure}");
            }
            for (name, acked) in report.acked {
                assert!(
                    acked.resource_version > highest_before,
                    "round {round} (seed {seed}): {name} was created at resourceVersion {} \
                     but resourceVersion {highest_before} was handed out before the restart",
                    acked.resource_version
                );
                acked_this_round += 1;
                model.insert(name, acked);
            }
        }
        drop(client);

        server = Server::start_in(&dir);
        let client = runtime.block_on(server.kube_client());
        let (highest, in_flight) =
            runtime.block_on(check_after_restart(&client, &mut model, round, seed));
        highest_before = highest;
        eprintln!(
            "api_crash: round {round}: killed after {delay:?}; {acked_this_round} creates \
             acknowledged, {in_flight} unacknowledged ones kept, {} in all; highest \
             resourceVersion {highest}",
            model.len()
        );
    }
    assert!(
        model.len() > ROUNDS,
        "the load acknowledged almost nothing ({} creates): the test checked nothing",
        model.len()
    );
}

/// Creates ConfigMaps one after another until the server goes away.
async fn writer(
    client: kube::Client,
    round: usize,
    w: usize,
    killed: Arc<AtomicBool>,
) -> WriterReport {
    let mut acked = Vec::new();
    let deadline = Instant::now() + WRITER_LIMIT;
    for seq in 0.. {
        if Instant::now() > deadline {
            return WriterReport {
                acked,
                failure: Some(format!("writer {w} ran {WRITER_LIMIT:?} without the kill")),
            };
        }
        let name = format!("{PREFIX}r{round}-w{w}-{seq}");
        match create(&client, &name).await {
            Ok((status, body)) if status == http::StatusCode::CREATED => {
                let cm: ConfigMap = serde_json::from_slice(&body).unwrap_or_else(|e| {
                    panic!("create {name}: 201 with a body that is not a ConfigMap: {e}")
                });
                acked.push((name, acked_of(&cm)));
            }
            Ok((status, body)) => {
                return WriterReport {
                    acked,
                    failure: Some(format!(
                        "create {name}: {status} (expected 201 Created): {}",
                        String::from_utf8_lossy(&body)
                    )),
                };
            }
            Err(_) if killed.load(Ordering::SeqCst) => break,
            Err(e) => {
                return WriterReport {
                    acked,
                    failure: Some(format!("create {name} failed before the kill: {e}")),
                };
            }
        }
    }
    WriterReport {
        acked,
        failure: None,
    }
}

/// POSTs a ConfigMap, returning the answer's status and body, or the transport error.
async fn create(client: &kube::Client, name: &str) -> Result<(http::StatusCode, Vec<u8>), String> {
    let body = serde_json::to_vec(&configmap(name)).expect("a ConfigMap serializes");
    let request = http::Request::post(format!("/api/v1/namespaces/{NAMESPACE}/configmaps"))
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(kube::client::Body::from(body))
        .expect("a valid request");
    let response = client.send(request).await.map_err(|e| e.to_string())?;
    let status = response.status();
    let body = response
        .into_body()
        .collect_bytes()
        .await
        .map_err(|e| e.to_string())?;
    Ok((status, body.to_vec()))
}

/// Lists the ConfigMaps after a restart and checks them against `model`; creates one more
/// (added to `model`). Returns the highest resourceVersion handed out so far, and how many
/// unacknowledged creates the server kept.
async fn check_after_restart(
    client: &kube::Client,
    model: &mut BTreeMap<String, Acked>,
    round: usize,
    seed: u64,
) -> (u64, usize) {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), NAMESPACE);
    let list = api
        .list(&ListParams::default())
        .await
        .expect("the ConfigMaps list after the restart");
    let list_rv = parse_rv(list.metadata.resource_version.as_deref());
    let mut present = BTreeMap::new();
    for cm in &list.items {
        let name = cm.metadata.name.clone().unwrap_or_default();
        if !name.starts_with(PREFIX) {
            continue;
        }
        assert_eq!(
            cm.data.as_ref(),
            Some(&data_for(&name)),
            "round {round} (seed {seed}): {name} came back with other data than it was created with"
        );
        present.insert(name, acked_of(cm));
    }
    let mut lost = Vec::new();
    for (name, acked) in model.iter() {
        match present.get(name) {
            Some(p) if p == acked => {}
            Some(p) => panic!(
                "round {round} (seed {seed}): {name} was acknowledged as {acked:?} but is {p:?} \
                 after the restart"
            ),
            None => lost.push(name.clone()),
        }
    }
    assert!(
        lost.is_empty(),
        "round {round} (seed {seed}): {} acknowledged ConfigMaps are gone after the restart, e.g. {:?}",
        lost.len(),
        &lost[..lost.len().min(10)]
    );
    let highest = present
        .values()
        .map(|a| a.resource_version)
        .chain(model.values().map(|a| a.resource_version))
        .max()
        .unwrap_or(0);
    assert!(
        list_rv >= highest,
        "round {round} (seed {seed}): the list's resourceVersion {list_rv} is below that of an \
         object in it ({highest})"
    );
    let in_flight = present.len() - model.len();

    let probe = format!("{PREFIX}probe-r{round}");
    let created = api
        .create(&PostParams::default(), &configmap(&probe))
        .await
        .expect("a create after the restart");
    let acked = acked_of(&created);
    assert!(
        acked.resource_version > highest,
        "round {round} (seed {seed}): a create after the restart got resourceVersion {} but \
         {highest} was handed out before it",
        acked.resource_version
    );
    let highest = acked.resource_version;
    model.insert(probe, acked);
    (highest, in_flight)
}

/// The ConfigMap named `name`, with data that depends on the name alone.
fn configmap(name: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        data: Some(data_for(name)),
        ..ConfigMap::default()
    }
}

/// The data of the ConfigMap `name`: its name and a blob of 16 to 2063 letters derived from it.
fn data_for(name: &str) -> BTreeMap<String, String> {
    // FNV-1a, then one xorshift step per letter.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    let len = 16 + (h % 2048) as usize;
    let mut x = h | 1;
    let blob = (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            char::from(b'a' + (x % 26) as u8)
        })
        .collect();
    BTreeMap::from([
        ("name".to_owned(), name.to_owned()),
        ("blob".to_owned(), blob),
    ])
}

fn acked_of(cm: &ConfigMap) -> Acked {
    Acked {
        uid: cm.metadata.uid.clone().expect("a uid"),
        resource_version: parse_rv(cm.metadata.resource_version.as_deref()),
    }
}

/// Setpoint's resourceVersions are decimal revisions (opaque to Kubernetes clients in general).
fn parse_rv(rv: Option<&str>) -> u64 {
    let rv = rv.expect("a resourceVersion");
    rv.parse()
        .unwrap_or_else(|_| panic!("resourceVersion {rv:?} is not a decimal revision"))
}
