//! The `root-ca-cert-publisher`: the `kube-root-ca.crt` ConfigMap in every namespace that is
//! not being deleted, holding the CA bundle that verifies the API server (`data["ca.crt"]`),
//! created when missing and put back when its data differs. Without a CA bundle
//! ([`LoopSettings::root_ca`](crate::LoopSettings)) the loop publishes nothing and says so once.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, PostParams};
use setpoint_runtime::{Action, Client, Controller, ControllerError, InformerOptions};
use tokio_util::sync::CancellationToken;

use super::{namespace_of, terminating};
use crate::LoopContext;

/// The controller's name, as kube-controller-manager names it.
const NAME: &str = "root-ca-cert-publisher";
/// The ConfigMap every namespace gets.
const CONFIG_MAP: &str = "kube-root-ca.crt";
/// The key of the bundle in it.
const KEY: &str = "ca.crt";
/// What the ConfigMap is for, in its `kubernetes.io/description` annotation.
const DESCRIPTION: &str = "The CA bundle of this cluster's API server, for clients in the \
    cluster that reach it through the kubernetes service. Published by Setpoint's \
    root-ca-cert-publisher; edits are overwritten.";

/// Why a pass failed.
#[derive(Debug, thiserror::Error)]
#[error("publishing {CONFIG_MAP} in {namespace}")]
pub(crate) struct PublishFailed {
    namespace: String,
    #[source]
    source: kube::Error,
}

struct Context {
    client: Client,
    bundle: String,
}

/// Runs the loop until `shutdown` is cancelled.
pub(crate) async fn run(
    ctx: LoopContext,
    shutdown: CancellationToken,
) -> Result<(), ControllerError> {
    let Some(bundle) = ctx.settings.root_ca.clone() else {
        tracing::warn!("no cluster CA bundle given: {CONFIG_MAP} is not published");
        shutdown.cancelled().await;
        return Ok(());
    };
    let context = Arc::new(Context {
        client: ctx.client.clone(),
        bundle,
    });
    Controller::<Namespace>::new(&ctx.factory)
        .named(NAME)
        .registered_in(&ctx.metrics)
        // Only this ConfigMap, filtered by the server: caching every ConfigMap would cost
        // each write of any of them a decode here.
        .watches_with(
            InformerOptions::<ConfigMap> {
                field_selector: Some(format!("metadata.name={CONFIG_MAP}")),
                ..InformerOptions::default()
            },
            |cm| namespace_of(cm, CONFIG_MAP),
        )
        .run(reconcile, context, shutdown.cancelled_owned())
        .await
}

async fn reconcile(namespace: Arc<Namespace>, ctx: Arc<Context>) -> Result<Action, PublishFailed> {
    if terminating(&namespace) {
        return Ok(Action::await_change());
    }
    let ns = namespace.metadata.name.clone().unwrap_or_default();
    let failed = |source| PublishFailed {
        namespace: ns.clone(),
        source,
    };
    let maps: Api<ConfigMap> = Api::namespaced(ctx.client.kube().clone(), &ns);
    let data = BTreeMap::from([(KEY.to_owned(), ctx.bundle.clone())]);
    let outcome = match maps.get_opt(CONFIG_MAP).await.map_err(failed)? {
        Some(current) if current.data.as_ref() == Some(&data) => return Ok(Action::await_change()),
        Some(mut current) => {
            current.data = Some(data);
            maps.replace(CONFIG_MAP, &PostParams::default(), &current)
                .await
        }
        None => {
            let mut map = ConfigMap {
                data: Some(data),
                ..ConfigMap::default()
            };
            map.metadata.name = Some(CONFIG_MAP.to_owned());
            map.metadata.annotations = Some(BTreeMap::from([(
                "kubernetes.io/description".to_owned(),
                DESCRIPTION.to_owned(),
            )]));
            maps.create(&PostParams::default(), &map).await
        }
    };
    match outcome {
        Ok(_) => Ok(Action::await_change()),
        // Raced with another writer (409) or the namespace began terminating (403): the
        // watch brings the next pass if one is needed.
        Err(kube::Error::Api(e)) if e.code == 409 || e.code == 403 => Ok(Action::await_change()),
        Err(source) => Err(failed(source)),
    }
}
