//! Which objects decide a Sync's health — every applied one with `wait`, plus
//! `healthChecks` — and waiting, until a deadline, for all of them to be healthy (`health.rs`
//! judges one object).

use std::time::Duration;

use serde_json::Value;
use tokio::time::{sleep, Instant};

use super::apply::dynamic_api;
use super::health::{assess, Health};
use super::prepare::Desired;
use super::Context;
use crate::kinds::Sync;
use crate::manifests::{split_api_version, ObjectId};

/// How often health is looked at while waiting.
const HEALTH_POLL: Duration = Duration::from_millis(250);

/// An object whose health decides `Ready`.
pub(super) struct Target {
    id: ObjectId,
    version: String,
}

/// With `wait`, every applied object; plus `healthChecks`.
pub(super) fn health_targets(sync: &Sync, desired: &[Desired]) -> Vec<Target> {
    let mut targets: Vec<Target> = Vec::new();
    if sync.spec.wait {
        targets.extend(desired.iter().map(|d| Target {
            id: d.id.clone(),
            version: d.version.clone(),
        }));
    }
    for check in &sync.spec.health_checks {
        let (group, version) = split_api_version(&check.api_version);
        let id = ObjectId {
            group: group.to_owned(),
            kind: check.kind.clone(),
            namespace: check.namespace.clone().unwrap_or_default(),
            name: check.name.clone(),
        };
        if !targets.iter().any(|t| t.id == id) {
            targets.push(Target {
                id,
                version: version.to_owned(),
            });
        }
    }
    targets
}

/// Waits until every target is healthy; the first unhealthy one's story otherwise.
pub(super) async fn wait_healthy(
    ctx: &Context,
    client: &kube::Client,
    targets: &[Target],
    deadline: Instant,
) -> Result<(), String> {
    loop {
        let mut blocking: Option<(ObjectId, Health)> = None;
        for target in targets {
            let health = look(ctx, client, target).await;
            if health != Health::Healthy {
                blocking = Some((target.id.clone(), health));
                break;
            }
        }
        let Some((id, health)) = blocking else {
            return Ok(());
        };
        if let Health::Failed(why) = &health {
            return Err(format!("health check failed: {id} failed: {why}"));
        }
        if Instant::now() >= deadline {
            let why = match health {
                Health::Progressing(why) | Health::Failed(why) => why,
                Health::Healthy => String::new(),
            };
            return Err(format!(
                "health check failed after timeout: {id} is not ready: {why}"
            ));
        }
        sleep(HEALTH_POLL).await;
    }
}

/// One target's health now.
async fn look(ctx: &Context, client: &kube::Client, target: &Target) -> Health {
    let served = match ctx
        .discovery
        .resolve(client, &target.id.group, &target.version, &target.id.kind)
        .await
    {
        Ok(served) => served,
        Err(e) => return Health::Progressing(e.to_string()),
    };
    let namespace = served.namespaced.then_some(target.id.namespace.as_str());
    let api = dynamic_api(client, &served.resource, namespace);
    match api.get_opt(&target.id.name).await {
        Ok(Some(object)) => assess(
            &target.id,
            &serde_json::to_value(object).unwrap_or(Value::Null),
        ),
        Ok(None) => Health::Progressing("not found".to_owned()),
        Err(e) => Health::Progressing(e.to_string()),
    }
}
