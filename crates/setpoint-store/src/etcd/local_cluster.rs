//! [`LocalEtcdCluster`]: a throwaway etcd cluster of several members on 127.0.0.1, for tests of
//! what happens when members fail. Like [`super::LocalEtcd`] (same binary, fsync off, watch
//! progress every 100 ms), each member on its own free client and peer ports, all in one
//! temporary directory; every member still running is killed when the cluster is dropped.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::local::healthy;
use super::{EtcdConfig, LocalEtcdError};

/// How long the members get to elect a leader and become healthy.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How many times a start is tried on new ports before its failure is reported.
const START_ATTEMPTS: usize = 3;
/// How many lines of each member's log [`LocalEtcdCluster::describe`] shows.
const LOG_TAIL: usize = 15;

/// One member of a [`LocalEtcdCluster`].
struct Member {
    child: Option<Child>,
    client: SocketAddr,
}

/// A running local etcd cluster; members can be killed one by one.
pub struct LocalEtcdCluster {
    members: Vec<Member>,
    dir: tempfile::TempDir,
}

impl LocalEtcdCluster {
    /// Starts `size` members (at least one) as one new cluster and waits until every member is
    /// healthy (the cluster has a leader) and is the member it should be.
    ///
    /// Tests run side by side, so a port picked free can be taken by another test's process
    /// before etcd binds it; a member that then exits, or a port that answers for another
    /// cluster, makes the attempt fail and a new one start on new ports.
    pub fn start(size: usize) -> Result<LocalEtcdCluster, LocalEtcdError> {
        let mut attempt = 1;
        loop {
            match LocalEtcdCluster::try_start(size) {
                Err(LocalEtcdError::Unhealthy { .. }) if attempt < START_ATTEMPTS => attempt += 1,
                result => return result,
            }
        }
    }

    fn try_start(size: usize) -> Result<LocalEtcdCluster, LocalEtcdError> {
        let dir = tempfile::Builder::new()
            .prefix("setpoint-etcd-cluster-")
            .tempdir()?;
        let binary = std::env::var("SETPOINT_ETCD").unwrap_or_else(|_| "etcd".into());
        let ports = distinct_free_ports(size.max(1))?;
        let initial_cluster = ports
            .iter()
            .enumerate()
            .map(|(i, (_, peer))| format!("m{i}=http://{peer}"))
            .collect::<Vec<_>>()
            .join(",");
        let mut cluster = LocalEtcdCluster {
            members: Vec::new(),
            dir,
        };
        for (i, (client, peer)) in ports.iter().enumerate() {
            let log = std::fs::File::create(cluster.log_path(i))?;
            let child = Command::new(&binary)
                .arg(format!("--name=m{i}"))
                .arg(format!(
                    "--data-dir={}",
                    cluster.dir.path().join(format!("m{i}")).display()
                ))
                .arg(format!("--listen-client-urls=http://{client}"))
                .arg(format!("--advertise-client-urls=http://{client}"))
                .arg(format!("--listen-peer-urls=http://{peer}"))
                .arg(format!("--initial-advertise-peer-urls=http://{peer}"))
                .arg(format!("--initial-cluster={initial_cluster}"))
                .arg("--initial-cluster-token=setpoint-test")
                .arg("--initial-cluster-state=new")
                .arg("--experimental-watch-progress-notify-interval=100ms")
                .arg("--unsafe-no-fsync")
                .stdin(Stdio::null())
                .stdout(Stdio::from(log.try_clone()?))
                .stderr(Stdio::from(log))
                .spawn()
                .map_err(|source| LocalEtcdError::NotInstalled {
                    binary: binary.clone(),
                    source,
                })?;
            cluster.members.push(Member {
                child: Some(child),
                client: *client,
            });
        }
        let deadline = Instant::now() + START_TIMEOUT;
        while !cluster.formed() {
            if Instant::now() > deadline {
                return Err(LocalEtcdError::Unhealthy {
                    timeout: START_TIMEOUT,
                    log: cluster.describe(),
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(cluster)
    }

    /// Whether every member not killed runs, is healthy, and answers as a distinct member of one cluster
    /// (not another test's etcd that took a port meant for this one).
    pub fn formed(&mut self) -> bool {
        let mut ids = std::collections::BTreeSet::new();
        let mut clusters = std::collections::BTreeSet::new();
        for member in &mut self.members {
            let Some(child) = member.child.as_mut() else {
                continue;
            };
            let running = matches!(child.try_wait(), Ok(None));
            if !running || !healthy(member.client) {
                return false;
            }
            let Some(status) = status(member.client) else {
                return false;
            };
            ids.insert(status.member);
            clusters.insert(status.cluster);
        }
        ids.len() == self.members.iter().filter(|m| m.child.is_some()).count()
            && clusters.len() == 1
    }

    /// Every member's state and the end of its log, for a test's failure message.
    #[must_use]
    pub fn describe(&self) -> String {
        let mut out = String::new();
        for (i, member) in self.members.iter().enumerate() {
            let state = match (&member.child, status(member.client)) {
                (None, _) => "killed".to_owned(),
                (Some(_), Some(s)) => format!(
                    "member {} of cluster {}, leader {}",
                    s.member,
                    s.cluster,
                    s.leader.as_deref().unwrap_or("none")
                ),
                (Some(_), None) => "not answering".to_owned(),
            };
            let log = std::fs::read_to_string(self.log_path(i)).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(LOG_TAIL).collect();
            out.push_str(&format!("m{i} ({}): {state}\n", member.client));
            for line in tail.into_iter().rev() {
                out.push_str("  ");
                out.push_str(line);
                out.push('\n');
            }
        }
        out
    }

    fn log_path(&self, index: usize) -> std::path::PathBuf {
        self.dir.path().join(format!("m{index}.log"))
    }

    /// Every member's client URL, killed members included.
    #[must_use]
    pub fn endpoints(&self) -> Vec<String> {
        self.members
            .iter()
            .map(|m| format!("http://{}", m.client))
            .collect()
    }

    /// A store configuration naming every member.
    #[must_use]
    pub fn config(&self) -> EtcdConfig {
        EtcdConfig::new(self.endpoints())
    }

    /// The index of the member that leads the cluster now, as a live member reports it
    /// (etcd's JSON gateway, `POST /v3/maintenance/status`: the member whose id is the
    /// leader's); `None` while there is no leader or no member answers.
    #[must_use]
    pub fn leader(&self) -> Option<usize> {
        self.members.iter().position(|m| {
            m.child.is_some()
                && status(m.client).is_some_and(|s| s.leader.as_ref() == Some(&s.member))
        })
    }

    /// Kills member `index` (SIGKILL) and waits for it; does nothing if it is gone already.
    pub fn kill(&mut self, index: usize) {
        if let Some(mut child) = self.members.get_mut(index).and_then(|m| m.child.take()) {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// What a member says of itself in its status.
struct Status {
    /// Its own id.
    member: String,
    /// Its cluster's id.
    cluster: String,
    /// The leader's id it knows, if any.
    leader: Option<String>,
}

/// A member's status (etcd's JSON gateway, `POST /v3/maintenance/status`); `None` if it does
/// not answer.
fn status(client: SocketAddr) -> Option<Status> {
    let mut stream = TcpStream::connect_timeout(&client, Duration::from_millis(200)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    stream
        .write_all(
            b"POST /v3/maintenance/status HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
        )
        .ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).ok()?;
    // The ids are uint64s, which the gateway writes as JSON strings.
    let field = |name: &str| {
        let start = answer.find(&format!("\"{name}\":\""))? + name.len() + 4;
        let len = answer[start..].find('"')?;
        Some(answer[start..start + len].to_owned())
    };
    Some(Status {
        member: field("member_id")?,
        cluster: field("cluster_id")?,
        leader: field("leader").filter(|l| l != "0"),
    })
}

/// `count` pairs of (client, peer) ports, all distinct: every listener is held until all
/// are picked, so the OS cannot hand out one port twice.
fn distinct_free_ports(count: usize) -> std::io::Result<Vec<(SocketAddr, SocketAddr)>> {
    let listeners = (0..count * 2)
        .map(|_| TcpListener::bind("127.0.0.1:0"))
        .collect::<std::io::Result<Vec<_>>>()?;
    let addrs = listeners
        .iter()
        .map(TcpListener::local_addr)
        .collect::<std::io::Result<Vec<_>>>()?;
    Ok(addrs.chunks(2).map(|pair| (pair[0], pair[1])).collect())
}

impl Drop for LocalEtcdCluster {
    fn drop(&mut self) {
        for i in 0..self.members.len() {
            self.kill(i);
        }
    }
}
