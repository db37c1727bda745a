//! Hostile requests, generated: every verb on a spread of resources and subresources, with
//! every query parameter the API reads set to its type's extremes (0, negative, max, overflow,
//! empty, garbage) and every kind of body malformed or mutated at a random place.
//!
//! Asserts for each request: an answer within a deadline (no hang), never a 5xx for client
//! input, every error a `Status` whose `code` is the HTTP status; and every so often, and at
//! the end, that the API still serves ordinary requests.
//!
//! The run is seeded and prints its seed. `SETPOINT_FUZZ_CASES` sets how many requests (the
//! test command runs a short pass), `SETPOINT_FUZZ_SEED` replays a run:
//!
//! ```text
//! SETPOINT_FUZZ_CASES=200000 cargo test --release -p setpoint-apiserver --test integration api_errors::fuzz -- --nocapture
//! ```

use std::time::Duration;

use bytes::Bytes;
use http::Request;
use http_body_util::BodyExt;
use rand::rngs::SmallRng;
use rand::SeedableRng;
use serde_json::{json, Value};
use std::sync::Arc;

use setpoint_apiserver::Api;

mod random;
mod resources;
mod systematic;
mod values;

use resources::{widget_crd, RESOURCES};

/// Requests in the short pass the test command runs.
const DEFAULT_CASES: u64 = 1500;
/// How long one request may take before it counts as a hang.
const DEADLINE: Duration = Duration::from_secs(20);

/// One generated request, printed when it fails.
#[derive(Debug)]
pub(super) struct Case {
    pub(super) method: &'static str,
    pub(super) uri: String,
    pub(super) content_type: &'static str,
    pub(super) body: Vec<u8>,
}

/// Sends `case`; a watch's stream is dropped unread (it may run for as long as it was asked).
async fn send(api: &Arc<Api>, case: &Case) -> Result<(u16, Value), String> {
    let request = Request::builder()
        .method(case.method)
        .uri(&case.uri)
        .header("content-type", case.content_type)
        .header("accept", "application/json")
        .body(Bytes::from(case.body.clone()))
        .map_err(|e| format!("the generator built a bad request: {e}"))?;
    // On a task of its own, so that a panic is reported as one failure among the others.
    let api = api.clone();
    let response = tokio::time::timeout(
        DEADLINE,
        tokio::spawn(async move { api.handle(request).await }),
    )
    .await
    .map_err(|_| "no answer within the deadline".to_owned())?
    .map_err(|e| format!("the handler failed: {e}"))?;
    let status = response.status().as_u16();
    if status == 200 && case.uri.contains("watch=") {
        return Ok((status, Value::Null));
    }
    let bytes = tokio::time::timeout(DEADLINE, response.into_body().collect())
        .await
        .map_err(|_| "the body did not end within the deadline".to_owned())?
        .map_err(|e| format!("the body failed: {e}"))?
        .to_bytes();
    Ok((
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    ))
}

/// The ordinary requests a healthy API answers.
async fn assert_healthy(api: &Api, after: u64) {
    let (create, _) = super::call(
        api,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        "application/json",
        &json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":format!("health-{after}")}})
            .to_string(),
    )
    .await;
    assert_eq!(
        create.as_u16(),
        201,
        "after {after} requests, a create failed"
    );
    let (list, body) = super::call(
        api,
        "GET",
        "/api/v1/namespaces/default/configmaps",
        "application/json",
        "",
    )
    .await;
    assert_eq!(
        list.as_u16(),
        200,
        "after {after} requests, a list failed: {body}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fuzz_hostile_requests_should_get_a_status_and_never_a_5xx() {
    let seed = std::env::var("SETPOINT_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random::<u64>);
    let cases = std::env::var("SETPOINT_FUZZ_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(DEFAULT_CASES);
    println!("fuzz: {cases} requests, SETPOINT_FUZZ_SEED={seed}");
    let mut rng = SmallRng::seed_from_u64(seed);
    let api = super::api().await;
    let (status, body) = super::call(
        &api,
        "POST",
        "/api/v1/namespaces",
        "application/json",
        r#"{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"fz"}}"#,
    )
    .await;
    assert_eq!(status.as_u16(), 201, "{body}");
    let crd = widget_crd().to_string();
    let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    let (status, body) = super::call(&api, "POST", crds, "application/json", &crd).await;
    assert_eq!(status.as_u16(), 201, "{body}");
    super::eventually_served(&api, "/apis/fuzz.setpoint.dev/v1/namespaces/fz/widgets").await;
    // Objects the requests can find: one of each resource, named "seed".
    for resource in RESOURCES {
        let object = (resource.object)("seed").to_string();
        if resource.collection.ends_with("/namespaces") {
            continue; // "fz" is the namespace's seed
        }
        let (status, body) = super::call(
            &api,
            "POST",
            resource.collection,
            "application/json",
            &object,
        )
        .await;
        assert_eq!(status.as_u16(), 201, "{}: {body}", resource.collection);
    }

    let mut codes = std::collections::BTreeMap::<u16, u64>::new();
    let fixed = systematic::systematic();
    let total = fixed.len() as u64 + cases;
    println!("fuzz: {} systematic requests first", fixed.len());
    let mut fixed = fixed.into_iter();
    // Failures by kind (method, status, resource path without names), with the first example.
    let mut failures = std::collections::BTreeMap::<String, (u64, String)>::new();
    for i in 0..total {
        let case = fixed.next().unwrap_or_else(|| random::case(&mut rng));
        let mut fail = |kind: String, shown: String| {
            failures.entry(kind).or_insert((0, shown)).0 += 1;
        };
        let resource_of = |uri: &str| {
            let path = uri.split('?').next().unwrap_or_default();
            let parts: Vec<&str> = path.split('/').collect();
            let resource = RESOURCES
                .iter()
                .filter(|r| path.starts_with(r.collection))
                .max_by_key(|r| r.collection.len())
                .map_or(path, |r| r.collection);
            let sub = if parts.len() > resource.split('/').count() + 1 {
                parts.last().copied().unwrap_or_default()
            } else {
                ""
            };
            format!("{resource}/{sub}")
        };
        let (status, body) = match send(&api, &case).await {
            Ok(answer) => answer,
            Err(problem) => {
                let problem_kind: String =
                    problem.chars().filter(|c| !c.is_ascii_digit()).collect();
                fail(
                    format!("{} {} {problem_kind}", case.method, resource_of(&case.uri)),
                    format!("request {i}: {problem}: {} {}", case.method, case.uri),
                );
                continue;
            }
        };
        *codes.entry(status).or_default() += 1;
        let shown = || {
            format!(
                "request {i} (seed {seed}): {} {} [{}] {} → {status} {body}",
                case.method,
                case.uri,
                case.content_type,
                String::from_utf8_lossy(&case.body[..case.body.len().min(300)])
            )
        };
        // kube-apiserver's one 5xx for a client's choice: a resourceVersion newer than the
        // store's, after waiting for it (504 Timeout, cause ResourceVersionTooLarge).
        let too_new =
            status == 504 && body["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge";
        // This API has no node agents to reach (no credentials), as it says.
        let no_nodes = status == 503 && case.uri.contains("/log");
        let kind = |what: &str| format!("{} {} {what}", case.method, resource_of(&case.uri));
        if status >= 500 && !too_new && !no_nodes {
            fail(kind(&format!("answered {status}")), shown());
        } else if status >= 400 {
            if body["kind"] != "Status" || body["code"] != status {
                fail(kind("an error that is not a Status with its code"), shown());
            } else if body["reason"].as_str().is_none_or(str::is_empty) {
                fail(kind("a Status without a reason"), shown());
            }
        }
        if i % 250 == 249 {
            assert_healthy(&api, i + 1).await;
        }
    }
    assert_healthy(&api, total + 1).await;
    println!("fuzz: answers by status code: {codes:?}");
    for (kind, (count, example)) in &failures {
        println!("fuzz: FAILED {count}× {kind}\n    e.g. {example}");
    }
    assert!(
        failures.is_empty(),
        "{} kinds of failure (seed {seed}), listed above",
        failures.len()
    );
}
