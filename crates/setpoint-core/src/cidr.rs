//! IPv4 address ranges in CIDR notation (`10.244.0.0/16`): parsing, membership, and cutting
//! a range into equal subranges — what node IPAM (a `/24` per node out of the cluster CIDR)
//! and the agent's pod addresses (hosts of the node's `/24`) need.

use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

/// An IPv4 range: a network address and a prefix length; the host bits of `addr` are zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ipv4Cidr {
    addr: Ipv4Addr,
    prefix: u8,
}

/// Why a CIDR could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid IPv4 CIDR {0:?}: want a.b.c.d/n with n ≤ 32 and no host bits set")]
pub struct CidrError(pub String);

impl Ipv4Cidr {
    /// `10.244.0.0/16`: the default cluster (pod) CIDR.
    pub const DEFAULT_CLUSTER: Ipv4Cidr = Ipv4Cidr {
        addr: Ipv4Addr::new(10, 244, 0, 0),
        prefix: 16,
    };

    /// The range `addr/prefix`; `None` if the prefix is over 32 or host bits are set.
    pub fn new(addr: Ipv4Addr, prefix: u8) -> Option<Ipv4Cidr> {
        if prefix > 32 || u32::from(addr) & !mask(prefix) != 0 {
            return None;
        }
        Some(Ipv4Cidr { addr, prefix })
    }

    /// The network address.
    pub fn addr(&self) -> Ipv4Addr {
        self.addr
    }

    /// The prefix length.
    pub fn prefix(&self) -> u8 {
        self.prefix
    }

    /// How many addresses the range holds.
    pub fn size(&self) -> u64 {
        1u64 << (32 - u32::from(self.prefix))
    }

    /// Whether `ip` is inside the range.
    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        u32::from(ip) & mask(self.prefix) == u32::from(self.addr)
    }

    /// Whether `other` lies wholly inside this range.
    pub fn covers(&self, other: &Ipv4Cidr) -> bool {
        other.prefix >= self.prefix && self.contains(other.addr)
    }

    /// How many `/sub` ranges the range holds (0 if `sub` is shorter than the prefix or
    /// over 32).
    pub fn subnet_count(&self, sub: u8) -> u64 {
        if sub < self.prefix || sub > 32 {
            return 0;
        }
        1u64 << (sub - self.prefix)
    }

    /// The `n`th `/sub` range inside this one, in address order.
    pub fn subnet(&self, sub: u8, n: u64) -> Option<Ipv4Cidr> {
        if n >= self.subnet_count(sub) {
            return None;
        }
        let step = 1u64 << (32 - u32::from(sub));
        let start = u64::from(u32::from(self.addr)) + n * step;
        Ipv4Cidr::new(Ipv4Addr::from(u32::try_from(start).ok()?), sub)
    }

    /// The index of `other` among this range's `/other.prefix` subranges, if it is one.
    pub fn subnet_index(&self, other: &Ipv4Cidr) -> Option<u64> {
        if !self.covers(other) {
            return None;
        }
        let offset = u64::from(u32::from(other.addr) - u32::from(self.addr));
        Some(offset >> (32 - u32::from(other.prefix)))
    }

    /// The address at offset `n` from the network address (`host(1)` is the first usable
    /// one of a `/24`), if inside the range.
    pub fn host(&self, n: u64) -> Option<Ipv4Addr> {
        if n >= self.size() {
            return None;
        }
        let ip = u64::from(u32::from(self.addr)) + n;
        Some(Ipv4Addr::from(u32::try_from(ip).ok()?))
    }

    /// The offset of `ip` from the network address, if inside the range.
    pub fn offset_of(&self, ip: Ipv4Addr) -> Option<u64> {
        self.contains(ip)
            .then(|| u64::from(u32::from(ip) - u32::from(self.addr)))
    }

    /// The broadcast (last) address.
    pub fn broadcast(&self) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.addr) | !mask(self.prefix))
    }
}

fn mask(prefix: u8) -> u32 {
    if prefix == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(prefix.min(32)))
    }
}

impl FromStr for Ipv4Cidr {
    type Err = CidrError;

    fn from_str(s: &str) -> Result<Ipv4Cidr, CidrError> {
        let bad = || CidrError(s.to_owned());
        let (addr, prefix) = s.trim().split_once('/').ok_or_else(bad)?;
        let addr: Ipv4Addr = addr.parse().map_err(|_| bad())?;
        let prefix: u8 = prefix.parse().map_err(|_| bad())?;
        Ipv4Cidr::new(addr, prefix).ok_or_else(bad)
    }
}

impl fmt::Display for Ipv4Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidrs_should_parse_cut_and_count() {
        let cluster: Ipv4Cidr = "10.244.0.0/16".parse().expect("valid");
        assert_eq!(cluster.subnet_count(24), 256);
        let third = cluster.subnet(24, 2).expect("inside");
        assert_eq!(third.to_string(), "10.244.2.0/24");
        assert_eq!(cluster.subnet_index(&third), Some(2));
        assert_eq!(cluster.subnet(24, 256), None);
        assert_eq!(third.host(1), Some(Ipv4Addr::new(10, 244, 2, 1)));
        assert_eq!(third.offset_of(Ipv4Addr::new(10, 244, 2, 9)), Some(9));
        assert_eq!(third.broadcast(), Ipv4Addr::new(10, 244, 2, 255));
        assert!(!third.contains(Ipv4Addr::new(10, 244, 3, 1)));
        assert!(
            "10.244.0.1/16".parse::<Ipv4Cidr>().is_err(),
            "host bits set"
        );
        assert!("10.244.0.0/33".parse::<Ipv4Cidr>().is_err());
        assert!("10.244.0.0".parse::<Ipv4Cidr>().is_err());
        let other: Ipv4Cidr = "10.245.0.0/24".parse().expect("valid");
        assert_eq!(cluster.subnet_index(&other), None);
    }
}
