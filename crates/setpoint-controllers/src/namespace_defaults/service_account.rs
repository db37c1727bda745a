//! The `serviceaccount` controller: the `default` ServiceAccount in every namespace that is
//! not being deleted, created when missing.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::api::{Api, PostParams};
use serde_json::json;
use setpoint_runtime::{Action, Client, Controller, ControllerError, InformerOptions};
use tokio_util::sync::CancellationToken;

use super::{namespace_of, terminating};
use crate::LoopContext;

/// The controller's name, as kube-controller-manager names it.
const NAME: &str = "serviceaccount";
/// The account every namespace gets.
const DEFAULT: &str = "default";

/// Why a pass failed.
#[derive(Debug, thiserror::Error)]
#[error("creating the default ServiceAccount of {namespace}")]
pub(crate) struct CreateFailed {
    namespace: String,
    #[source]
    source: kube::Error,
}

/// Runs the loop until `shutdown` is cancelled.
pub(crate) async fn run(
    ctx: LoopContext,
    shutdown: CancellationToken,
) -> Result<(), ControllerError> {
    Controller::<Namespace>::new(&ctx.factory)
        .named(NAME)
        .registered_in(&ctx.metrics)
        .watches_with(
            InformerOptions::<ServiceAccount> {
                field_selector: Some(format!("metadata.name={DEFAULT}")),
                ..InformerOptions::default()
            },
            |sa| namespace_of(sa, DEFAULT),
        )
        .run(reconcile, Arc::new(ctx.client), shutdown.cancelled_owned())
        .await
}

async fn reconcile(namespace: Arc<Namespace>, client: Arc<Client>) -> Result<Action, CreateFailed> {
    if terminating(&namespace) {
        return Ok(Action::await_change());
    }
    let ns = namespace.metadata.name.clone().unwrap_or_default();
    let accounts: Api<ServiceAccount> = Api::namespaced(client.kube().clone(), &ns);
    let account: ServiceAccount = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": DEFAULT, "namespace": ns},
    }))
    .unwrap_or_default();
    match accounts.create(&PostParams::default(), &account).await {
        Ok(_) => Ok(Action::await_change()),
        // Already there; or the namespace started terminating meanwhile (403): nothing to do.
        Err(kube::Error::Api(e)) if e.code == 409 || e.code == 403 => Ok(Action::await_change()),
        Err(source) => Err(CreateFailed {
            namespace: ns,
            source,
        }),
    }
}
