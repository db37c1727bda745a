//! The API server the benchmarks talk to: Setpoint's API on a memory store, inside the bench
//! process, reached in-process (the SDK's in-process transport calls [`Api::handle`]) or over
//! real HTTPS on a loopback port (the same transport `setpoint server` runs, with a
//! kubeconfig). Objects are created by calling the API handler directly, many at once.

use std::sync::Arc;

use anyhow::{bail, Context, Result};
use bytes::Bytes;
use futures::StreamExt;
use http::{Method, Request, StatusCode};
use http_body_util::BodyExt;
use setpoint_apiserver::{serve, Api, RunningServer, TransportConfig};
use setpoint_runtime::Client;
use setpoint_store::{EmbeddedConfig, EmbeddedStore, Store};
use tokio_util::sync::CancellationToken;

/// Requests in flight while populating.
const IN_FLIGHT: usize = 64;

/// A running API server on a fresh memory store.
pub(crate) struct Server {
    /// The API handler.
    pub(crate) api: Arc<Api>,
    /// The HTTPS transport, while serving.
    remote: Option<Remote>,
}

struct Remote {
    running: RunningServer,
    stop: CancellationToken,
    kubeconfig: std::path::PathBuf,
    /// Holds the credentials and kubeconfig; deleted on drop.
    _dir: tempfile::TempDir,
}

impl Server {
    /// Starts the API on a fresh memory store, and its HTTPS transport on `127.0.0.1:0`.
    pub(crate) async fn start() -> Result<Server> {
        let store = EmbeddedStore::open(EmbeddedConfig::in_memory())
            .map_err(|e| anyhow::anyhow!("opening the memory store: {e}"))?;
        let store: Arc<dyn Store> = Arc::new(store);
        let api = Api::new(store)
            .await
            .map_err(|e| anyhow::anyhow!("starting the API: {}", e.message))?;
        let dir = tempfile::tempdir().context("creating the server's data directory")?;
        let stop = CancellationToken::new();
        let running = serve(
            TransportConfig::new(dir.path(), "127.0.0.1:0".parse()?),
            api.clone(),
            stop.clone(),
        )
        .await
        .context("serving HTTPS")?;
        let kubeconfig = running.kubeconfig_path().to_path_buf();
        Ok(Server {
            api,
            remote: Some(Remote {
                running,
                stop,
                kubeconfig,
                _dir: dir,
            }),
        })
    }

    /// A client calling the API handler directly.
    pub(crate) fn in_process(&self) -> Client {
        let api = self.api.clone();
        Client::in_process(move |request| {
            let api = api.clone();
            async move { api.handle(request).await }
        })
    }

    /// A client over HTTPS, from the server's admin kubeconfig.
    pub(crate) async fn remote(&self) -> Result<Client> {
        let remote = self
            .remote
            .as_ref()
            .context("the HTTPS transport is stopped")?;
        Client::from_kubeconfig(&remote.kubeconfig)
            .await
            .context("a client from the kubeconfig")
    }

    /// Stops the HTTPS transport and waits for it.
    pub(crate) async fn stop(mut self) -> Result<()> {
        if let Some(remote) = self.remote.take() {
            remote.stop.cancel();
            remote.running.wait().await.context("stopping HTTPS")?;
        }
        Ok(())
    }

    /// Sends one request to the handler; returns the status and the whole body.
    pub(crate) async fn call(
        &self,
        method: Method,
        path: &str,
        content_type: &str,
        body: Vec<u8>,
    ) -> Result<(StatusCode, Bytes)> {
        call(&self.api, method, path, content_type, body).await
    }

    /// Sends every create of `creates` (and its follow-up), [`IN_FLIGHT`] at a time, spread
    /// over the runtime's threads. Returns how many were created.
    pub(crate) async fn create_all(&self, creates: impl Iterator<Item = Create>) -> Result<usize> {
        let mut results = futures::stream::iter(creates)
            .map(|create| {
                let api = self.api.clone();
                tokio::spawn(async move {
                    let (status, answer) = call(
                        &api,
                        Method::POST,
                        &create.path,
                        "application/json",
                        create.body,
                    )
                    .await?;
                    if status != StatusCode::CREATED {
                        bail!(
                            "creating {}: {status}: {}",
                            create.name,
                            String::from_utf8_lossy(&answer)
                        );
                    }
                    if let Some(then) = create.then {
                        let (status, answer) = call(
                            &api,
                            then.method.clone(),
                            &then.path,
                            then.content_type,
                            then.body,
                        )
                        .await?;
                        if !status.is_success() {
                            bail!(
                                "{} {}: {status}: {}",
                                then.method,
                                then.path,
                                String::from_utf8_lossy(&answer)
                            );
                        }
                    }
                    Ok(())
                })
            })
            .buffer_unordered(IN_FLIGHT);
        let mut created = 0;
        while let Some(result) = results.next().await {
            result.context("a create task panicked")??;
            created += 1;
        }
        Ok(created)
    }
}

/// One object to create, and what to send right after it.
pub(crate) struct Create {
    /// The object's name, for errors.
    pub(crate) name: String,
    /// The collection to `POST` to.
    pub(crate) path: String,
    /// The object's JSON.
    pub(crate) body: Vec<u8>,
    /// A request sent once the object exists (e.g. a status patch).
    pub(crate) then: Option<Call>,
}

/// One request.
pub(crate) struct Call {
    pub(crate) method: Method,
    pub(crate) path: String,
    pub(crate) content_type: &'static str,
    pub(crate) body: Vec<u8>,
}

async fn call(
    api: &Api,
    method: Method,
    path: &str,
    content_type: &str,
    body: Vec<u8>,
) -> Result<(StatusCode, Bytes)> {
    let request = Request::builder()
        .method(method)
        .uri(path)
        .header(http::header::CONTENT_TYPE, content_type)
        .header(http::header::ACCEPT, "application/json")
        .body(Bytes::from(body))?;
    let response = api.handle(request).await;
    let status = response.status();
    let body = response
        .into_body()
        .collect()
        .await
        .context("reading a response body")?
        .to_bytes();
    Ok((status, body))
}
