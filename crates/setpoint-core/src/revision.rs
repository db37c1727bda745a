//! The store's logical clock. Every change to the store gets the next [`Revision`]; an object's
//! Kubernetes `resourceVersion` is the revision of its last modification, as a decimal string.

use std::fmt;
use std::str::FromStr;

/// A point in the store's history. Revisions start at 1 for the first change; `Revision::ZERO`
/// stands for "before any change" (an empty store is at revision 0).
///
/// Revisions are totally ordered and strictly increase with every change, across keys.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Revision(pub u64);

impl Revision {
    /// The revision of an empty store: no change has happened yet.
    pub const ZERO: Revision = Revision(0);

    /// The revision right after this one.
    #[must_use]
    pub fn next(self) -> Revision {
        Revision(self.0 + 1)
    }

    /// The raw counter value.
    #[must_use]
    pub fn get(self) -> u64 {
        self.0
    }
}

impl fmt::Display for Revision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A `resourceVersion` string that is not a decimal revision.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid resource version {0:?}: expected a decimal number")]
pub struct ParseRevisionError(pub String);

impl FromStr for Revision {
    type Err = ParseRevisionError;

    /// Parses a `resourceVersion`: plain ASCII decimal digits, no sign, no spaces.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(ParseRevisionError(s.to_owned()));
        }
        s.parse::<u64>()
            .map(Revision)
            .map_err(|_| ParseRevisionError(s.to_owned()))
    }
}

impl From<u64> for Revision {
    fn from(v: u64) -> Self {
        Revision(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revision_should_round_trip_through_its_decimal_form() {
        let r: Revision = "12345".parse().unwrap();
        assert_eq!(r, Revision(12345));
        assert_eq!(r.to_string(), "12345");
    }

    #[test]
    fn revision_should_reject_signs_spaces_and_overflow() {
        for bad in ["", "-1", "+1", " 1", "1 ", "0x10", "18446744073709551616"] {
            assert!(bad.parse::<Revision>().is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn revisions_should_order_by_counter() {
        assert!(Revision(2) > Revision(1));
        assert_eq!(Revision::ZERO.next(), Revision(1));
    }
}
