//! Decoding the resize stream: a sequence of JSON objects `{"Width":…,"Height":…}` (Go's
//! `json.Encoder` output, newline-separated), which may be split across messages or frames.

use serde::Deserialize;

use super::TerminalSize;

/// The largest pending resize text kept while waiting for the rest of an object.
const MAX_PENDING: usize = 4096;

#[derive(Deserialize)]
struct Wire {
    #[serde(rename = "Width", default)]
    width: u16,
    #[serde(rename = "Height", default)]
    height: u16,
}

/// Accumulates resize bytes and yields each complete size.
#[derive(Debug, Default)]
pub(crate) struct ResizeDecoder {
    pending: Vec<u8>,
}

impl ResizeDecoder {
    /// Adds `bytes`; returns the sizes completed by them. Malformed input is dropped.
    pub(crate) fn push(&mut self, bytes: &[u8]) -> Vec<TerminalSize> {
        self.pending.extend_from_slice(bytes);
        let mut sizes = Vec::new();
        let mut stream = serde_json::Deserializer::from_slice(&self.pending).into_iter::<Wire>();
        let mut consumed = 0;
        loop {
            match stream.next() {
                Some(Ok(wire)) => {
                    consumed = stream.byte_offset();
                    sizes.push(TerminalSize {
                        width: wire.width,
                        height: wire.height,
                    });
                }
                Some(Err(error)) if error.is_eof() => break,
                Some(Err(_)) => {
                    consumed = self.pending.len();
                    break;
                }
                None => {
                    consumed = self.pending.len();
                    break;
                }
            }
        }
        self.pending.drain(..consumed);
        if self.pending.len() > MAX_PENDING {
            self.pending.clear();
        }
        sizes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resize_decoder_should_yield_sizes_split_across_chunks() {
        let mut decoder = ResizeDecoder::default();
        assert!(decoder.push(b"{\"Width\":80,").is_empty());
        let sizes = decoder.push(b"\"Height\":24}\n{\"Width\":100,\"Height\":30}\n");
        assert_eq!(
            sizes,
            vec![
                TerminalSize {
                    width: 80,
                    height: 24
                },
                TerminalSize {
                    width: 100,
                    height: 30
                }
            ]
        );
        assert!(decoder.push(b"not json").is_empty());
        assert_eq!(
            decoder.push(b"{\"Width\":1,\"Height\":2}"),
            vec![TerminalSize {
                width: 1,
                height: 2
            }]
        );
    }
}
