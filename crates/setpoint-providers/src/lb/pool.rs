//! The address pool of LoadBalancer Services (`--lb-address-pool`): which IPv4 addresses a
//! Service may get and which it holds. An allocation honours `spec.loadBalancerIP` when it is
//! in the pool and free, keeps what a Service holds, prefers the address its status already
//! shows (so allocations survive a restart of the loop), else takes the lowest free one.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use setpoint_runtime::ObjectKey;

/// Why an address could not be had.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PoolError {
    /// The pool's description is neither `FIRST-LAST` nor a CIDR.
    #[error("address pool {0:?}: expected FIRST-LAST or an IPv4 CIDR")]
    Syntax(String),
    /// `spec.loadBalancerIP` names an address outside the pool.
    #[error("loadBalancerIP {0} is not in the address pool")]
    NotInPool(Ipv4Addr),
    /// `spec.loadBalancerIP` names an address another Service holds.
    #[error("loadBalancerIP {ip} is held by the Service {holder}")]
    Taken {
        /// The address.
        ip: Ipv4Addr,
        /// Who holds it.
        holder: ObjectKey,
    },
    /// Every address is held.
    #[error("the address pool is exhausted ({0} addresses, all held)")]
    Exhausted(u64),
}

/// The pool and who holds which address.
#[derive(Debug, Clone)]
pub struct AddressPool {
    /// The lowest address, as an integer.
    first: u32,
    /// The highest address (≥ `first`).
    last: u32,
    /// Held addresses and their holders; every key is in `first..=last`, each holder once.
    held: BTreeMap<u32, ObjectKey>,
}

impl AddressPool {
    /// Parses `FIRST-LAST` (`127.0.100.1-127.0.100.254`) or a CIDR (`127.0.100.0/24`, whose
    /// network and broadcast addresses are left out when it has more than two).
    pub fn parse(text: &str) -> Result<AddressPool, PoolError> {
        let bad = || PoolError::Syntax(text.to_owned());
        let ip = |s: &str| s.trim().parse::<Ipv4Addr>().map_err(|_| bad());
        let (first, last) = if let Some((a, b)) = text.split_once('-') {
            (u32::from(ip(a)?), u32::from(ip(b)?))
        } else if let Some((a, bits)) = text.split_once('/') {
            let bits: u32 = bits.trim().parse().map_err(|_| bad())?;
            if bits > 32 {
                return Err(bad());
            }
            let size = 1u64 << (32 - bits);
            let base = u32::from(ip(a)?) & !u32::try_from(size - 1).map_err(|_| bad())?;
            let top = base + u32::try_from(size - 1).map_err(|_| bad())?;
            if size > 2 {
                (base + 1, top - 1)
            } else {
                (base, top)
            }
        } else {
            let one = u32::from(ip(text)?);
            (one, one)
        };
        if first > last {
            return Err(bad());
        }
        Ok(AddressPool {
            first,
            last,
            held: BTreeMap::new(),
        })
    }

    /// Whether `ip` is in the pool.
    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        (self.first..=self.last).contains(&u32::from(ip))
    }

    /// The address `key` holds.
    pub fn held_by(&self, key: &ObjectKey) -> Option<Ipv4Addr> {
        self.held
            .iter()
            .find(|(_, holder)| *holder == key)
            .map(|(ip, _)| Ipv4Addr::from(*ip))
    }

    /// Records that `key` holds `ip` (adopting what a running balancer or a Service's status
    /// shows), when `ip` is in the pool, free, and `key` holds nothing yet. Whether it does.
    pub fn adopt(&mut self, key: &ObjectKey, ip: Ipv4Addr) -> bool {
        if let Some(held) = self.held_by(key) {
            return held == ip;
        }
        if !self.contains(ip) || self.held.contains_key(&u32::from(ip)) {
            return false;
        }
        self.held.insert(u32::from(ip), key.clone());
        true
    }

    /// The address for `key`: `wanted` (`spec.loadBalancerIP`) if given, else the one it
    /// holds, else `previous` (its status) if free, else the lowest free one.
    pub fn allocate(
        &mut self,
        key: &ObjectKey,
        wanted: Option<Ipv4Addr>,
        previous: Option<Ipv4Addr>,
    ) -> Result<Ipv4Addr, PoolError> {
        let held = self.held_by(key);
        if let Some(ip) = wanted {
            if !self.contains(ip) {
                return Err(PoolError::NotInPool(ip));
            }
            match self.held.get(&u32::from(ip)) {
                Some(holder) if holder != key => {
                    return Err(PoolError::Taken {
                        ip,
                        holder: holder.clone(),
                    })
                }
                _ => {}
            }
            self.release(key);
            self.held.insert(u32::from(ip), key.clone());
            return Ok(ip);
        }
        if let Some(ip) = held {
            return Ok(ip);
        }
        if let Some(ip) = previous {
            if self.adopt(key, ip) {
                return Ok(ip);
            }
        }
        let free = (self.first..=self.last).find(|ip| !self.held.contains_key(ip));
        match free {
            Some(ip) => {
                self.held.insert(ip, key.clone());
                Ok(Ipv4Addr::from(ip))
            }
            None => Err(PoolError::Exhausted(u64::from(self.last - self.first) + 1)),
        }
    }

    /// Frees what `key` holds.
    pub fn release(&mut self, key: &ObjectKey) {
        self.held.retain(|_, holder| holder != key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> Ipv4Addr {
        s.parse().expect("an address")
    }

    #[test]
    fn a_pool_should_parse_ranges_and_cidrs() {
        let range = AddressPool::parse("127.0.100.1-127.0.100.3").expect("range");
        assert!(range.contains(ip("127.0.100.3")) && !range.contains(ip("127.0.100.4")));
        let cidr = AddressPool::parse("10.1.2.0/30").expect("cidr");
        assert!(!cidr.contains(ip("10.1.2.0")) && cidr.contains(ip("10.1.2.1")));
        assert!(cidr.contains(ip("10.1.2.2")) && !cidr.contains(ip("10.1.2.3")));
        for bad in ["", "10.0.0.2-10.0.0.1", "10.0.0.0/33", "x-y"] {
            assert!(AddressPool::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn allocation_should_honour_wanted_held_and_previous_addresses() {
        let mut pool = AddressPool::parse("127.0.100.1-127.0.100.3").expect("pool");
        let (a, b, c, d) = (
            ObjectKey::namespaced("ns", "a"),
            ObjectKey::namespaced("ns", "b"),
            ObjectKey::namespaced("ns", "c"),
            ObjectKey::namespaced("ns", "d"),
        );
        // b's status shows .2 from before a restart: a must not take it.
        assert!(pool.adopt(&b, ip("127.0.100.2")));
        assert_eq!(pool.allocate(&a, None, None), Ok(ip("127.0.100.1")));
        assert_eq!(
            pool.allocate(&a, None, Some(ip("127.0.100.3"))),
            Ok(ip("127.0.100.1"))
        );
        assert_eq!(
            pool.allocate(&c, Some(ip("127.0.100.2")), None),
            Err(PoolError::Taken {
                ip: ip("127.0.100.2"),
                holder: b.clone()
            })
        );
        assert_eq!(
            pool.allocate(&c, Some(ip("127.0.200.1")), None),
            Err(PoolError::NotInPool(ip("127.0.200.1")))
        );
        assert_eq!(
            pool.allocate(&c, Some(ip("127.0.100.3")), None),
            Ok(ip("127.0.100.3"))
        );
        assert!(matches!(
            pool.allocate(&d, None, None),
            Err(PoolError::Exhausted(3))
        ));
        pool.release(&a);
        assert_eq!(pool.allocate(&d, None, None), Ok(ip("127.0.100.1")));
        // Moving to a wanted address frees the old one.
        pool.release(&b);
        assert_eq!(
            pool.allocate(&c, Some(ip("127.0.100.2")), None),
            Ok(ip("127.0.100.2"))
        );
        assert_eq!(pool.held_by(&c), Some(ip("127.0.100.2")));
        assert!(pool.adopt(&a, ip("127.0.100.3")));
    }
}
