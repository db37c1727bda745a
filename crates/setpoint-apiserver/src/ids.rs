//! Random identifiers: version 4 UUIDs, as object uids, audit IDs, token ids (`jti`) and the
//! uids of token-file users are made.

use rand::Rng as _;

/// A new random UUID (version 4), in its usual text form.
#[must_use]
pub fn new_uid() -> String {
    let mut b: [u8; 16] = rand::thread_rng().gen();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn new_uid_should_be_a_random_version_4_uuid() {
        let (a, b) = (super::new_uid(), super::new_uid());
        assert_ne!(a, b);
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "4");
        assert!(matches!(&a[19..20], "8" | "9" | "a" | "b"), "{a}");
    }
}
