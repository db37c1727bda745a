//! [`LocalEtcd`]: a throwaway single-member etcd on 127.0.0.1, for tests and benchmarks. It
//! runs the `etcd` binary named by `SETPOINT_ETCD`, else the one on the `PATH` (Debian's
//! `etcd-server` package; `scripts/check` installs it), in a temporary data directory, on free
//! client and peer ports, and kills it when dropped. Watch progress notifications come every
//! 100 ms (`--experimental-watch-progress-notify-interval`), so that the API server's watch
//! caches on quiet resources stay current on etcd before 3.4.31/3.5.13;
//! [`LocalEtcd::start_with_default_flags`] leaves etcd's default (10 minutes), as a plainly
//! started etcd has (see `docs/design/storage.md`).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::EtcdConfig;

/// Why a local etcd could not be started.
#[derive(Debug, thiserror::Error)]
pub enum LocalEtcdError {
    /// The binary is not there.
    #[error(
        "cannot run etcd ({binary}): {source}; install it (Debian: `apt-get install etcd-server`, \
         which scripts/check does) or point SETPOINT_ETCD at an etcd binary"
    )]
    NotInstalled {
        /// The binary tried.
        binary: String,
        /// Why it did not start.
        #[source]
        source: std::io::Error,
    },
    /// It started but did not become healthy.
    #[error("etcd did not become healthy within {timeout:?}; its log ends with:\n{log}")]
    Unhealthy {
        /// How long it was given.
        timeout: Duration,
        /// The end of its log.
        log: String,
    },
    /// A temporary directory, a free port or the log file could not be had.
    #[error("preparing a local etcd failed: {0}")]
    Setup(#[from] std::io::Error),
}

/// The PEM files of a TLS-serving [`LocalEtcd`].
#[derive(Clone, Debug)]
pub struct LocalEtcdTls {
    /// The member's serving certificate (for 127.0.0.1).
    pub cert: PathBuf,
    /// Its key.
    pub key: PathBuf,
    /// The CA that clients' certificates must be signed by.
    pub ca: PathBuf,
}

/// A running single-member etcd, killed (and its data deleted) on drop.
pub struct LocalEtcd {
    child: Child,
    endpoint: String,
    dir: tempfile::TempDir,
}

/// How a [`LocalEtcd`] is started.
#[derive(Clone, Copy)]
struct Flags {
    /// etcd's fsyncs on (else `--unsafe-no-fsync`).
    durable: bool,
    /// Watch progress notifications every 100 ms (else etcd's default, 10 minutes).
    progress_notify: bool,
}

/// How long a local etcd gets to become healthy.
const START_TIMEOUT: Duration = Duration::from_secs(30);

impl LocalEtcd {
    /// Starts a member for tests: fsync off (`--unsafe-no-fsync`: fast, not durable across a
    /// machine crash), data in a temporary directory. Blocks until it is healthy.
    pub fn start() -> Result<LocalEtcd, LocalEtcdError> {
        let dir = tempfile::Builder::new()
            .prefix("setpoint-etcd-")
            .tempdir()?;
        LocalEtcd::start_with(dir, false, None)
    }

    /// Starts a member as [`LocalEtcd::start`] does but with etcd's default watch progress
    /// notification interval (10 minutes), as a plainly started etcd has: on etcd before
    /// 3.4.31/3.5.13 a quiet watch then learns nothing of its progress for minutes.
    pub fn start_with_default_flags() -> Result<LocalEtcd, LocalEtcdError> {
        let dir = tempfile::Builder::new()
            .prefix("setpoint-etcd-")
            .tempdir()?;
        let flags = Flags {
            durable: false,
            progress_notify: false,
        };
        LocalEtcd::start_with_tls(dir, flags, None)
    }

    /// Starts a durable member (etcd's fsyncs on, for benchmarks) with its data in a temporary
    /// directory under `parent`. Blocks until it is healthy.
    pub fn start_durable_in(parent: &std::path::Path) -> Result<LocalEtcd, LocalEtcdError> {
        let dir = tempfile::Builder::new()
            .prefix("setpoint-etcd-")
            .tempdir_in(parent)?;
        LocalEtcd::start_with(dir, true, None)
    }

    /// Starts a member for tests (as [`LocalEtcd::start`]) that serves clients over TLS only,
    /// with `tls`'s certificate, and requires client certificates signed by its CA. (A plain
    /// HTTP listener on another port serves only the health check used while starting.)
    pub fn start_tls(tls: &LocalEtcdTls) -> Result<LocalEtcd, LocalEtcdError> {
        let dir = tempfile::Builder::new()
            .prefix("setpoint-etcd-")
            .tempdir()?;
        LocalEtcd::start_with(dir, false, Some(tls))
    }

    fn start_with(
        dir: tempfile::TempDir,
        durable: bool,
        tls: Option<&LocalEtcdTls>,
    ) -> Result<LocalEtcd, LocalEtcdError> {
        let flags = Flags {
            durable,
            progress_notify: true,
        };
        LocalEtcd::start_with_tls(dir, flags, tls)
    }

    fn start_with_tls(
        dir: tempfile::TempDir,
        flags: Flags,
        tls: Option<&LocalEtcdTls>,
    ) -> Result<LocalEtcd, LocalEtcdError> {
        // A port that was free when chosen may be taken before etcd binds it (by another test
        // starting its own member): a member that exits at once is started again on new ports.
        let mut attempt = 1;
        loop {
            match LocalEtcd::try_start(&dir, flags, tls) {
                Ok((child, endpoint)) => {
                    return Ok(LocalEtcd {
                        child,
                        endpoint,
                        dir,
                    })
                }
                Err(Attempt::Exited(_)) if attempt < START_ATTEMPTS => attempt += 1,
                Err(Attempt::Exited(error) | Attempt::Failed(error)) => return Err(error),
            }
        }
    }

    /// One start on fresh ports and an empty data directory: the child and the client URL once
    /// it is healthy.
    fn try_start(
        dir: &tempfile::TempDir,
        flags: Flags,
        tls: Option<&LocalEtcdTls>,
    ) -> Result<(Child, String), Attempt> {
        let binary = std::env::var("SETPOINT_ETCD").unwrap_or_else(|_| "etcd".into());
        let [client, peer, health] = free_ports().map_err(Attempt::setup)?;
        let data = dir.path().join("data");
        if data.exists() {
            std::fs::remove_dir_all(&data).map_err(Attempt::setup)?;
        }
        let peer_url = format!("http://{peer}");
        let (client_url, listen_urls) = match tls {
            Some(_) => (
                format!("https://{client}"),
                format!("https://{client},http://{health}"),
            ),
            None => (format!("http://{client}"), format!("http://{client}")),
        };
        let health = if tls.is_some() { health } else { client };
        let log_path = dir.path().join("etcd.log");
        let log = std::fs::File::create(&log_path).map_err(Attempt::setup)?;
        let mut command = Command::new(&binary);
        command
            .arg("--name=setpoint")
            .arg(format!("--data-dir={}", data.display()))
            .arg(format!("--listen-client-urls={listen_urls}"))
            .arg(format!("--advertise-client-urls={client_url}"))
            .arg(format!("--listen-peer-urls={peer_url}"))
            .arg(format!("--initial-advertise-peer-urls={peer_url}"))
            .arg(format!("--initial-cluster=setpoint={peer_url}"))
            .arg("--initial-cluster-state=new")
            .stdin(Stdio::null())
            .stdout(Stdio::from(log.try_clone().map_err(Attempt::setup)?))
            .stderr(Stdio::from(log));
        if !flags.durable {
            command.arg("--unsafe-no-fsync");
        }
        if flags.progress_notify {
            command.arg("--experimental-watch-progress-notify-interval=100ms");
        }
        if let Some(tls) = tls {
            command
                .arg(format!("--cert-file={}", tls.cert.display()))
                .arg(format!("--key-file={}", tls.key.display()))
                .arg(format!("--trusted-ca-file={}", tls.ca.display()))
                .arg("--client-cert-auth");
        }
        let mut child = command
            .spawn()
            .map_err(|source| Attempt::Failed(LocalEtcdError::NotInstalled { binary, source }))?;
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if healthy(health) {
                return Ok((child, client_url));
            }
            let exited = matches!(child.try_wait(), Ok(Some(_)));
            if exited || Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                let log = std::fs::read_to_string(&log_path).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(20).collect();
                let error = LocalEtcdError::Unhealthy {
                    timeout: START_TIMEOUT,
                    log: tail.into_iter().rev().collect::<Vec<_>>().join("\n"),
                };
                return Err(if exited {
                    Attempt::Exited(error)
                } else {
                    Attempt::Failed(error)
                });
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The client URL.
    #[must_use]
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// A store configuration for this member.
    #[must_use]
    pub fn config(&self) -> EtcdConfig {
        EtcdConfig::new([self.endpoint.clone()])
    }

    /// Its data directory.
    #[must_use]
    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// Where its log is written.
    #[must_use]
    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("etcd.log")
    }
}

impl Drop for LocalEtcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Three distinct ports nobody listens on now (the OS's choice of free ones).
fn free_ports() -> std::io::Result<[SocketAddr; 3]> {
    let listeners = [
        TcpListener::bind("127.0.0.1:0")?,
        TcpListener::bind("127.0.0.1:0")?,
        TcpListener::bind("127.0.0.1:0")?,
    ];
    Ok([
        listeners[0].local_addr()?,
        listeners[1].local_addr()?,
        listeners[2].local_addr()?,
    ])
}

/// How a start attempt failed.
enum Attempt {
    /// etcd exited (a port taken meanwhile, say): worth another attempt.
    Exited(LocalEtcdError),
    /// Anything else.
    Failed(LocalEtcdError),
}

impl Attempt {
    fn setup(error: std::io::Error) -> Attempt {
        Attempt::Failed(LocalEtcdError::Setup(error))
    }
}

/// How many times a member that exits at once is started.
const START_ATTEMPTS: u32 = 3;

/// Whether etcd's `/health` answers `"health":"true"` (it has a leader and serves).
pub(super) fn healthy(client: SocketAddr) -> bool {
    let Ok(mut stream) = TcpStream::connect_timeout(&client, Duration::from_millis(200)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    if stream
        .write_all(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer.contains("\"health\":\"true\"")
}
