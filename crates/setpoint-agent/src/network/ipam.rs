//! The pods' addresses on this node: a file-backed allocator over the node's pod range
//! (`spec.podCIDR`), in the manner of the host-local IPAM plugin.
//!
//! Each allocation is a file `<dir>/<ip>` holding the owning pod's uid, created exclusively
//! (`O_EXCL`), so a restarted agent finds every allocation it made and two pods never share an
//! address. The network address, the gateway (the first host address, held by the bridge) and
//! the broadcast address are never handed out. Allocation goes round the range from just after
//! the last address handed out (`<dir>/last`), so a released address is not reused at once.

use std::io::Write as _;
use std::net::Ipv4Addr;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use setpoint_core::cidr::Ipv4Cidr;

/// Why an address could not be allocated.
#[derive(Debug, thiserror::Error)]
pub(crate) enum IpamError {
    /// Every address of the range is taken.
    #[error("no free address left in {0}")]
    Exhausted(Ipv4Cidr),
    /// The allocation files could not be read or written.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

/// The allocator of one pod range, its state in `dir`.
#[derive(Debug, Clone)]
pub(crate) struct Ipam {
    dir: PathBuf,
    range: Ipv4Cidr,
}

impl Ipam {
    /// The allocator of `range` keeping its files in `dir` (created if needed).
    pub(crate) fn open(dir: &Path, range: Ipv4Cidr) -> Result<Ipam, IpamError> {
        std::fs::create_dir_all(dir).map_err(|source| IpamError::Io {
            what: format!("creating {}", dir.display()),
            source,
        })?;
        Ok(Ipam {
            dir: dir.to_owned(),
            range,
        })
    }

    /// The address `uid` holds, or a new one for it.
    pub(crate) fn allocate(&self, uid: &str) -> Result<Ipv4Addr, IpamError> {
        if let Some(ip) = self.held_by(uid).into_iter().next() {
            return Ok(ip);
        }
        let size = self.range.size();
        // Offsets 0 (network), 1 (gateway) and size-1 (broadcast) are never handed out.
        if size < 4 {
            return Err(IpamError::Exhausted(self.range));
        }
        let first = 2;
        let usable = size - 3;
        let start = self
            .last()
            .and_then(|ip| self.range.offset_of(ip))
            .filter(|o| (first..size - 1).contains(o))
            .map_or(first, |o| o + 1);
        for step in 0..usable {
            let offset = first + (start - first + step) % usable;
            let Some(ip) = self.range.host(offset) else {
                continue;
            };
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(crate::process::PRIVATE_FILE_MODE)
                .open(self.dir.join(ip.to_string()))
            {
                Ok(mut file) => {
                    file.write_all(uid.as_bytes())
                        .map_err(|source| IpamError::Io {
                            what: format!("recording {ip} for {uid}"),
                            source,
                        })?;
                    let _ = crate::process::write_private(&self.dir.join("last"), ip.to_string());
                    return Ok(ip);
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(source) => {
                    return Err(IpamError::Io {
                        what: format!("recording {ip} for {uid}"),
                        source,
                    })
                }
            }
        }
        Err(IpamError::Exhausted(self.range))
    }

    /// Releases every address `uid` holds.
    pub(crate) fn release(&self, uid: &str) {
        for ip in self.held_by(uid) {
            let _ = std::fs::remove_file(self.dir.join(ip.to_string()));
        }
    }

    /// Every allocation: address and owner.
    pub(crate) fn allocations(&self) -> Vec<(Ipv4Addr, String)> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut out: Vec<(Ipv4Addr, String)> = entries
            .flatten()
            .filter_map(|e| {
                let ip: Ipv4Addr = e.file_name().to_str()?.parse().ok()?;
                let owner = std::fs::read_to_string(e.path()).ok()?;
                Some((ip, owner.trim().to_owned()))
            })
            .collect();
        out.sort();
        out
    }

    fn held_by(&self, uid: &str) -> Vec<Ipv4Addr> {
        self.allocations()
            .into_iter()
            .filter(|(ip, owner)| owner == uid && self.range.contains(*ip))
            .map(|(ip, _)| ip)
            .collect()
    }

    fn last(&self) -> Option<Ipv4Addr> {
        std::fs::read_to_string(self.dir.join("last"))
            .ok()?
            .trim()
            .parse()
            .ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_should_be_unique_stable_and_skip_gateway_and_broadcast() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let range: Ipv4Cidr = "10.9.0.0/29".parse().expect("cidr");
        let ipam = Ipam::open(dir.path(), range).expect("open");
        let a = ipam.allocate("a").expect("a");
        assert_eq!(a, Ipv4Addr::new(10, 9, 0, 2), "first after the gateway");
        assert_eq!(ipam.allocate("a").expect("again"), a, "idempotent");
        let reopened = Ipam::open(dir.path(), range).expect("reopen");
        assert_eq!(reopened.allocate("a").expect("after restart"), a);
        let others: Vec<_> = ["b", "c", "d", "e"]
            .iter()
            .map(|u| reopened.allocate(u).expect("free"))
            .collect();
        assert_eq!(
            others,
            (3..=6)
                .map(|d| Ipv4Addr::new(10, 9, 0, d))
                .collect::<Vec<_>>()
        );
        assert!(matches!(
            reopened.allocate("f"),
            Err(IpamError::Exhausted(_))
        ));
        reopened.release("c");
        // Round the range from the last one handed out: the freed .4 comes next.
        assert_eq!(
            reopened.allocate("f").expect("freed"),
            Ipv4Addr::new(10, 9, 0, 4)
        );
        for gone in ["b", "d", "e"] {
            reopened.release(gone);
        }
        assert_eq!(
            reopened.allocations(),
            vec![
                (Ipv4Addr::new(10, 9, 0, 2), "a".to_owned()),
                (Ipv4Addr::new(10, 9, 0, 4), "f".to_owned())
            ]
        );
    }
}
