//! The values `setpoint debug store-writer` writes: self-describing and checksummed, so that a
//! value read back after a crash names the write that produced it and shows any corruption.
//!
//! Format (ASCII): `crash1 run=<run> w=<writer> k=<key> seq=<seq> pad=<n> <n filler bytes>
//! sum=<16 hex digits>`, where the filler byte `i` is `b'a' + (seq + i) % 26`, `n` varies with
//! `seq` up to 4 KiB (so writes straddle pages), and `sum` is the FNV-1a 64 hash of everything
//! before ` sum=`. `(run, writer, seq)` identifies the write. `tests/store_crash.rs` parses this
//! format independently; keep the two in step.

use std::fmt::Write as _;

/// The identity of one write, as carried in its value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WriteId {
    /// The writer process's run id.
    pub(crate) run: u64,
    /// The writer task within the process.
    pub(crate) writer: usize,
    /// The key index within the writer's keys.
    pub(crate) key: usize,
    /// The writer's sequence number for this write, counted from 0 in each run.
    pub(crate) seq: u64,
}

/// The value that write `id` stores.
pub(crate) fn encode(id: WriteId) -> Vec<u8> {
    let pad = filler_len(id.seq);
    let mut body = format!(
        "crash1 run={} w={} k={} seq={} pad={pad} ",
        id.run, id.writer, id.key, id.seq
    );
    body.extend((0..pad as u64).map(|i| filler_byte(id.seq, i)));
    let sum = fnv1a(body.as_bytes());
    let _ = write!(body, " sum={sum:016x}");
    body.into_bytes()
}

/// How many filler bytes the write with sequence number `seq` carries.
fn filler_len(seq: u64) -> usize {
    (seq.wrapping_mul(7919) % 4000) as usize
}

/// Filler byte `i` of the write with sequence number `seq`.
fn filler_byte(seq: u64, i: u64) -> char {
    char::from(b'a' + ((seq.wrapping_add(i)) % 26) as u8)
}

/// The FNV-1a 64-bit hash.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_should_end_with_the_checksum_of_the_rest() {
        let value = encode(WriteId {
            run: 7,
            writer: 2,
            key: 5,
            seq: 11,
        });
        let text = std::str::from_utf8(&value).expect("ascii");
        let (body, sum) = text.rsplit_once(" sum=").expect("has a checksum");
        assert_eq!(
            u64::from_str_radix(sum, 16).expect("hex"),
            fnv1a(body.as_bytes())
        );
        assert!(
            body.starts_with("crash1 run=7 w=2 k=5 seq=11 pad="),
            "{body}"
        );
        let pad = filler_len(11);
        assert_eq!(
            body.len(),
            format!("crash1 run=7 w=2 k=5 seq=11 pad={pad} ").len() + pad
        );
    }

    #[test]
    fn filler_should_vary_in_length_with_the_sequence() {
        let lengths: std::collections::HashSet<_> = (0..100).map(filler_len).collect();
        assert!(lengths.len() > 50);
        assert!(lengths.iter().all(|&n| n < 4000));
    }
}
