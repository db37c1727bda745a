//! The issuers' loop: keeps each Issuer's and ClusterIssuer's `Ready` condition true to
//! whether it can sign — `selfSigned` always can (reason `IsReady`); `ca` can when its Secret
//! holds a CA certificate and that certificate's key (`KeyPairVerified`), else `Ready=False`
//! with cert-manager's reason (`ErrGetKeyPair`, `ErrInvalidKeyPair`). A change to a CA
//! Secret reconciles the issuers naming it; every issuer is also looked at again each poll
//! interval.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{Patch, PatchParams};
use kube::ResourceExt as _;
use serde_json::json;
use setpoint_runtime::{Action, Client, Clock, Controller, ControllerError, ObjectKey};

use super::issuer::{ClusterIssuer, Issuer, IssuerConfig, IssuerObject};
use super::pki::Signer;
use super::signer::signer_of;
use super::timing::api_time;
use super::CLUSTER_RESOURCE_NAMESPACE;
use crate::ProviderContext;

/// Why an issuer's status could not be written (retried with back-off).
#[derive(Debug, thiserror::Error)]
#[error("writing the status of {kind} {name}")]
pub(crate) struct IssuerStatusError {
    kind: &'static str,
    name: String,
    #[source]
    source: kube::Error,
}

struct Context {
    client: Client,
    clock: Clock,
    poll: Duration,
}

/// Runs the Issuer and ClusterIssuer loops until `shutdown`.
pub(crate) async fn run(
    ctx: &ProviderContext,
    shutdown: tokio_util::sync::CancellationToken,
) -> Result<(), ControllerError> {
    let context = Arc::new(Context {
        client: ctx.client.clone(),
        clock: ctx.clock.clone(),
        poll: ctx.settings.poll_interval,
    });
    let issuers = ctx.factory.informer::<Issuer>().store();
    let namespaced = Controller::<Issuer>::new(&ctx.factory)
        .named("cert-manager-issuers")
        .registered_in(&ctx.metrics)
        .watches::<Secret, _>(move |secret: &Secret| {
            let namespace = secret.namespace().unwrap_or_default();
            let name = secret.name_any();
            issuers
                .list_namespace(&namespace)
                .into_iter()
                .filter(|i| names_secret(&i.spec.config, &name))
                .map(|i| ObjectKey::of(i.as_ref()))
                .collect::<Vec<_>>()
        })
        .run(
            reconcile_issuer,
            Arc::clone(&context),
            shutdown.clone().cancelled_owned(),
        );
    let cluster_issuers = ctx.factory.informer::<ClusterIssuer>().store();
    let cluster = Controller::<ClusterIssuer>::new(&ctx.factory)
        .named("cert-manager-clusterissuers")
        .registered_in(&ctx.metrics)
        .watches::<Secret, _>(move |secret: &Secret| {
            if secret.namespace().as_deref() != Some(CLUSTER_RESOURCE_NAMESPACE) {
                return Vec::new();
            }
            let name = secret.name_any();
            cluster_issuers
                .list()
                .into_iter()
                .filter(|i| names_secret(&i.spec.config, &name))
                .map(|i| ObjectKey::of(i.as_ref()))
                .collect()
        })
        .run(
            reconcile_cluster_issuer,
            context,
            shutdown.cancelled_owned(),
        );
    let (a, b) = tokio::join!(namespaced, cluster);
    a.and(b)
}

fn names_secret(config: &IssuerConfig, secret: &str) -> bool {
    config
        .ca
        .as_ref()
        .is_some_and(|ca| ca.secret_name == secret)
}

async fn reconcile_issuer(
    issuer: Arc<Issuer>,
    ctx: Arc<Context>,
) -> Result<Action, IssuerStatusError> {
    let namespace = issuer.namespace().unwrap_or_default();
    let condition = ready(
        &ctx,
        issuer.as_ref(),
        &namespace,
        issuer.metadata.generation,
    )
    .await;
    if let Some(condition) = condition {
        ctx.client
            .namespaced_api::<Issuer>(&namespace)
            .patch_status(
                &issuer.name_any(),
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"conditions": [condition]}})),
            )
            .await
            .map_err(|source| IssuerStatusError {
                kind: "Issuer",
                name: format!("{namespace}/{}", issuer.name_any()),
                source,
            })?;
    }
    Ok(Action::requeue(ctx.poll))
}

async fn reconcile_cluster_issuer(
    issuer: Arc<ClusterIssuer>,
    ctx: Arc<Context>,
) -> Result<Action, IssuerStatusError> {
    let condition = ready(
        &ctx,
        issuer.as_ref(),
        CLUSTER_RESOURCE_NAMESPACE,
        issuer.metadata.generation,
    )
    .await;
    if let Some(condition) = condition {
        ctx.client
            .api::<ClusterIssuer>()
            .patch_status(
                &issuer.name_any(),
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"conditions": [condition]}})),
            )
            .await
            .map_err(|source| IssuerStatusError {
                kind: "ClusterIssuer",
                name: issuer.name_any(),
                source,
            })?;
    }
    Ok(Action::requeue(ctx.poll))
}

/// The `Ready` condition the issuer should have, when it differs from the one it has.
async fn ready(
    ctx: &Context,
    issuer: &impl IssuerObject,
    namespace: &str,
    generation: Option<i64>,
) -> Option<Condition> {
    let (status, reason, message) = match signer_of(&ctx.client, issuer.config(), namespace).await {
        Ok(Signer::SelfSigned) => ("True", "IsReady", String::new()),
        Ok(Signer::Ca(_)) => ("True", "KeyPairVerified", "Signing CA verified".to_owned()),
        Err(e) => ("False", e.reason(), e.to_string()),
    };
    let previous = issuer.conditions().iter().find(|c| c.type_ == "Ready");
    if previous.is_some_and(|p| {
        p.status == status
            && p.reason == reason
            && p.message == message
            && p.observed_generation == generation
    }) {
        return None;
    }
    let since = previous.filter(|p| p.status == status).map_or_else(
        || api_time(ctx.clock.now()),
        |p| p.last_transition_time.clone(),
    );
    Some(Condition {
        type_: "Ready".to_owned(),
        status: status.to_owned(),
        reason: reason.to_owned(),
        message,
        last_transition_time: since,
        observed_generation: generation,
    })
}
