//! One attempt of a probe's action (`exec`, `httpGet`, `tcpSocket`), resolved once from the
//! probe and its target.

use std::path::PathBuf;
use std::process::Stdio;

use k8s_openapi::api::core::v1::{Container, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::http::{http_get, Scheme};
use super::ProbeTarget;

/// How long an `exec` probe's output may be in a failure message.
const MAX_MESSAGE: usize = 1024;

/// What one attempt does.
#[derive(Debug, Clone)]
pub(super) enum Action {
    Exec {
        argv: Vec<String>,
        env: Vec<(String, String)>,
        working_dir: PathBuf,
    },
    HttpGet {
        scheme: Scheme,
        host: String,
        port: u16,
        path: String,
        headers: Vec<(String, String)>,
    },
    TcpSocket {
        host: String,
        port: u16,
    },
    /// The probe cannot run; every attempt fails with this message.
    Invalid(String),
}

impl Action {
    /// Resolves `probe`'s action against `target` (default host, named ports).
    pub(super) fn of(probe: &Probe, target: &ProbeTarget) -> Action {
        let default_host = target.host.to_string();
        if let Some(exec) = &probe.exec {
            let argv = exec.command.clone().unwrap_or_default();
            if argv.is_empty() {
                return Action::Invalid("exec probe has no command".to_owned());
            }
            return Action::Exec {
                argv,
                env: target.env.clone(),
                working_dir: target.working_dir.clone(),
            };
        }
        if let Some(get) = &probe.http_get {
            let scheme = match get.scheme.as_deref() {
                None | Some("HTTP") => Scheme::Http,
                Some("HTTPS") => Scheme::Https,
                Some(other) => return Action::Invalid(format!("unsupported scheme {other:?}")),
            };
            let port = match resolve_port(&get.port, &target.container) {
                Ok(port) => port,
                Err(message) => return Action::Invalid(message),
            };
            let mut path = get.path.clone().unwrap_or_default();
            if !path.starts_with('/') {
                path.insert(0, '/');
            }
            return Action::HttpGet {
                scheme,
                host: non_empty(get.host.as_deref()).unwrap_or(default_host),
                port,
                path,
                headers: get
                    .http_headers
                    .iter()
                    .flatten()
                    .map(|h| (h.name.clone(), h.value.clone()))
                    .collect(),
            };
        }
        if let Some(tcp) = &probe.tcp_socket {
            return match resolve_port(&tcp.port, &target.container) {
                Ok(port) => Action::TcpSocket {
                    host: non_empty(tcp.host.as_deref()).unwrap_or(default_host),
                    port,
                },
                Err(message) => Action::Invalid(message),
            };
        }
        if probe.grpc.is_some() {
            return Action::Invalid("grpc probes are not supported by this agent".to_owned());
        }
        Action::Invalid("probe has no action".to_owned())
    }

    /// Runs one attempt: `Ok` if it passed, else why not. Not bounded in time: the caller
    /// applies the probe's timeout (dropping the future kills an `exec` command).
    pub(super) async fn check(self) -> Result<(), String> {
        match self {
            Action::Exec {
                argv,
                env,
                working_dir,
            } => exec(argv, env, working_dir).await,
            Action::HttpGet {
                scheme,
                host,
                port,
                path,
                headers,
            } => http_get(scheme, &host, port, &path, &headers).await,
            Action::TcpSocket { host, port } => {
                match tokio::net::TcpStream::connect((host.as_str(), port)).await {
                    Ok(_) => Ok(()),
                    Err(e) => Err(format!("dial tcp {}: {e}", join_host_port(&host, port))),
                }
            }
            Action::Invalid(message) => Err(message),
        }
    }
}

async fn exec(
    argv: Vec<String>,
    env: Vec<(String, String)>,
    working_dir: PathBuf,
) -> Result<(), String> {
    let child = tokio::process::Command::new(&argv[0])
        .args(&argv[1..])
        .env_clear()
        .envs(env)
        .current_dir(&working_dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("running {:?}: {e}", argv[0]))?;
    // Timing out drops this future: then the command's whole process group is killed, not
    // just its first process (`sh -c 'sleep 100'` leaves no `sleep` behind).
    let mut group = GroupKiller(
        child
            .id()
            .and_then(|pid| rustix::process::Pid::from_raw(pid as i32)),
    );
    let output = child
        .wait_with_output()
        .await
        .map_err(|e| format!("running {:?}: {e}", argv[0]));
    group.0 = None;
    let output = output?;
    if output.status.success() {
        return Ok(());
    }
    let mut text = output.stdout;
    text.extend_from_slice(&output.stderr);
    text.truncate(MAX_MESSAGE);
    let text = String::from_utf8_lossy(&text).trim_end().to_owned();
    let status = match output.status.code() {
        Some(code) => format!("exit code {code}"),
        None => "killed by a signal".to_owned(),
    };
    Err(if text.is_empty() {
        format!("command {argv:?} failed: {status}")
    } else {
        format!("command {argv:?} failed: {status}: {text}")
    })
}

/// Kills a running `exec` probe's process group when dropped (disarmed once the command has
/// been waited for). The group leader is not reaped while this is armed, so the group id
/// cannot have been reused.
struct GroupKiller(Option<rustix::process::Pid>);

impl Drop for GroupKiller {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
    }
}

/// A port number, or the number of the container's port with that name.
fn resolve_port(port: &IntOrString, container: &Container) -> Result<u16, String> {
    let number = match port {
        IntOrString::Int(n) => *n,
        IntOrString::String(s) => match s.parse::<i32>() {
            Ok(n) => n,
            Err(_) => container
                .ports
                .iter()
                .flatten()
                .find(|p| p.name.as_deref() == Some(s.as_str()))
                .map(|p| p.container_port)
                .ok_or_else(|| {
                    format!("port {s:?} is not a port of container {:?}", container.name)
                })?,
        },
    };
    u16::try_from(number)
        .ok()
        .filter(|n| *n != 0)
        .ok_or_else(|| format!("invalid port number {number}"))
}

fn non_empty(s: Option<&str>) -> Option<String> {
    s.filter(|s| !s.is_empty()).map(str::to_owned)
}

/// `host:port`, bracketing an IPv6 address.
pub(super) fn join_host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}
