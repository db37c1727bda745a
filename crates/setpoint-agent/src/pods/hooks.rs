//! Container lifecycle hooks: `preStop`, run before a container is sent SIGTERM, within the
//! pod's grace period. An `exec` hook runs its command on the host with the container's
//! environment and working directory (there is no container to exec into); a `sleep` hook
//! waits; an `httpGet` hook sends a plain HTTP GET to the node. A hook that fails is logged;
//! the container is stopped anyway, as the kubelet does.

use std::net::IpAddr;
use std::process::Stdio;

use k8s_openapi::api::core::v1::LifecycleHandler;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::time::Instant;

use crate::process::RunSpec;

/// Runs a `preStop` hook of the container run `spec`, giving up at `deadline`.
pub(super) async fn run_pre_stop(
    hook: LifecycleHandler,
    spec: RunSpec,
    host: IpAddr,
    deadline: Instant,
) {
    let outcome = tokio::time::timeout_at(deadline, run(hook, spec, host)).await;
    match outcome {
        Ok(Ok(())) => {}
        Ok(Err(message)) => tracing::warn!(%message, "preStop hook failed"),
        Err(_) => tracing::warn!("preStop hook did not finish within the grace period"),
    }
}

async fn run(hook: LifecycleHandler, spec: RunSpec, host: IpAddr) -> Result<(), String> {
    if let Some(exec) = hook.exec {
        let argv = exec.command.unwrap_or_default();
        let (program, args) = argv.split_first().ok_or("exec hook without a command")?;
        let status = tokio::process::Command::new(program)
            .args(args)
            .env_clear()
            .envs(spec.env.iter().map(|(k, v)| (k, v)))
            .current_dir(&spec.working_dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .status()
            .await
            .map_err(|e| format!("exec {program:?}: {e}"))?;
        return if status.success() {
            Ok(())
        } else {
            Err(format!("exec {program:?}: {status}"))
        };
    }
    if let Some(sleep) = hook.sleep {
        let seconds = u64::try_from(sleep.seconds).unwrap_or(0);
        tokio::time::sleep(std::time::Duration::from_secs(seconds)).await;
        return Ok(());
    }
    if let Some(get) = hook.http_get {
        let port = match get.port {
            IntOrString::Int(port) => u16::try_from(port).map_err(|_| "bad port")?,
            IntOrString::String(name) => {
                return Err(format!(
                    "named port {name:?} in a preStop hook is not supported"
                ))
            }
        };
        let host = get.host.unwrap_or_else(|| host.to_string());
        let path = get.path.unwrap_or_else(|| "/".to_owned());
        let mut stream = tokio::net::TcpStream::connect((host.as_str(), port))
            .await
            .map_err(|e| format!("connecting to {host}:{port}: {e}"))?;
        let request =
            format!("GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n\r\n");
        stream
            .write_all(request.as_bytes())
            .await
            .map_err(|e| e.to_string())?;
        let mut response = Vec::new();
        stream
            .read_to_end(&mut response)
            .await
            .map_err(|e| e.to_string())?;
        return Ok(());
    }
    Err("a hook with no action".to_owned())
}
