//! [`LocalEtcdCluster`]: a throwaway etcd cluster of several members on 127.0.0.1, for tests of
//! what happens when members fail. Like [`super::LocalEtcd`] (same binary, fsync off, watch
//! progress every 100 ms), each member on its own free client and peer ports, all in one
//! temporary directory; every member still running is killed when the cluster is dropped.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::local::{free_port, healthy};
use super::{EtcdConfig, LocalEtcdError};

/// How long the members get to elect a leader and become healthy.
const START_TIMEOUT: Duration = Duration::from_secs(30);

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
    /// healthy (the cluster has a leader).
    pub fn start(size: usize) -> Result<LocalEtcdCluster, LocalEtcdError> {
        let dir = tempfile::Builder::new()
            .prefix("setpoint-etcd-cluster-")
            .tempdir()?;
        let binary = std::env::var("SETPOINT_ETCD").unwrap_or_else(|_| "etcd".into());
        let ports = (0..size.max(1))
            .map(|_| Ok((free_port()?, free_port()?)))
            .collect::<std::io::Result<Vec<_>>>()?;
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
            let log = std::fs::File::create(cluster.dir.path().join(format!("m{i}.log")))?;
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
        for i in 0..cluster.members.len() {
            while !healthy(cluster.members[i].client) {
                if Instant::now() > deadline {
                    let log = std::fs::read_to_string(cluster.dir.path().join(format!("m{i}.log")))
                        .unwrap_or_default();
                    let tail: Vec<&str> = log.lines().rev().take(20).collect();
                    return Err(LocalEtcdError::Unhealthy {
                        timeout: START_TIMEOUT,
                        log: tail.into_iter().rev().collect::<Vec<_>>().join("\n"),
                    });
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        Ok(cluster)
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
            m.child.is_some() && status(m.client).is_some_and(|(me, leader)| me == leader)
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

/// A member's own id and the leader's id it knows, from its status; `None` if it does not
/// answer or knows no leader.
fn status(client: SocketAddr) -> Option<(String, String)> {
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
    let me = field("member_id")?;
    let leader = field("leader").filter(|l| l != "0")?;
    Some((me, leader))
}

impl Drop for LocalEtcdCluster {
    fn drop(&mut self) {
        for i in 0..self.members.len() {
            self.kill(i);
        }
    }
}
