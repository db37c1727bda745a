//! SPDY/3 header blocks: `count(32)` then `len(32) name len(32) value` per pair, compressed
//! with zlib primed with the SPDY/3 dictionary. Each direction of a session is one zlib
//! stream: every block is sync-flushed and the next continues the same stream, so one
//! [`HeaderEncoder`] and one [`HeaderDecoder`] live as long as the session.

use bytes::{BufMut as _, BytesMut};
use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};

use super::dictionary::DICTIONARY;
use super::SpdyError;

/// The largest decompressed header block accepted.
const MAX_BLOCK: usize = 256 * 1024;

/// A stream's headers: lower-case names, values as sent (several values NUL-joined).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct HeaderBlock(pub(crate) Vec<(String, String)>);

impl HeaderBlock {
    /// The first value of `name` (lower-case).
    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.split('\0').next().unwrap_or(value.as_str()))
    }

    fn encode(&self) -> Vec<u8> {
        let mut out = BytesMut::new();
        out.put_u32(u32::try_from(self.0.len()).unwrap_or(0));
        for (name, value) in &self.0 {
            for text in [name.to_ascii_lowercase().as_str(), value.as_str()] {
                out.put_u32(u32::try_from(text.len()).unwrap_or(0));
                out.put_slice(text.as_bytes());
            }
        }
        out.to_vec()
    }

    fn decode(raw: &[u8]) -> Result<Self, SpdyError> {
        let bad = |what: &str| SpdyError::Headers(what.to_owned());
        let mut rest = raw;
        let mut take = |n: usize| -> Result<&[u8], SpdyError> {
            if rest.len() < n {
                return Err(bad("truncated header block"));
            }
            let (head, tail) = rest.split_at(n);
            rest = tail;
            Ok(head)
        };
        let word = |bytes: &[u8]| u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
        let count = word(take(4)?);
        let mut pairs = Vec::new();
        for _ in 0..count {
            let mut pair = [String::new(), String::new()];
            for slot in &mut pair {
                let len = usize::try_from(word(take(4)?)).map_err(|_| bad("length"))?;
                let text = take(len)?;
                *slot = String::from_utf8(text.to_vec()).map_err(|_| bad("non-UTF-8 header"))?;
            }
            let [name, value] = pair;
            pairs.push((name.to_ascii_lowercase(), value));
        }
        Ok(Self(pairs))
    }
}

/// Compresses the header blocks one side sends.
pub(crate) struct HeaderEncoder {
    zlib: Compress,
}

impl std::fmt::Debug for HeaderEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HeaderEncoder")
    }
}

impl HeaderEncoder {
    /// A fresh zlib stream primed with the dictionary.
    pub(crate) fn new() -> Result<Self, SpdyError> {
        let mut zlib = Compress::new(Compression::default(), true);
        zlib.set_dictionary(&DICTIONARY)
            .map_err(|e| SpdyError::Headers(e.to_string()))?;
        Ok(Self { zlib })
    }

    /// The compressed, sync-flushed block for `headers`.
    pub(crate) fn encode(&mut self, headers: &HeaderBlock) -> Result<Vec<u8>, SpdyError> {
        let input = headers.encode();
        let start = self.zlib.total_in();
        let mut out = Vec::with_capacity(input.len() + 64);
        loop {
            let consumed = usize::try_from(self.zlib.total_in() - start).unwrap_or(input.len());
            let rest = input.get(consumed..).unwrap_or_default();
            self.zlib
                .compress_vec(rest, &mut out, FlushCompress::Sync)
                .map_err(|e| SpdyError::Headers(e.to_string()))?;
            let consumed = usize::try_from(self.zlib.total_in() - start).unwrap_or(input.len());
            if consumed >= input.len() && out.len() < out.capacity() {
                return Ok(out);
            }
            out.reserve(256);
        }
    }
}

/// Decompresses the header blocks the peer sends.
pub(crate) struct HeaderDecoder {
    zlib: Decompress,
}

impl std::fmt::Debug for HeaderDecoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HeaderDecoder")
    }
}

impl Default for HeaderDecoder {
    fn default() -> Self {
        Self {
            zlib: Decompress::new(true),
        }
    }
}

impl HeaderDecoder {
    /// Decodes one block (continuing the session's zlib stream).
    pub(crate) fn decode(&mut self, block: &[u8]) -> Result<HeaderBlock, SpdyError> {
        let start = self.zlib.total_in();
        let mut out = Vec::with_capacity(block.len() * 4 + 64);
        loop {
            let consumed = usize::try_from(self.zlib.total_in() - start).unwrap_or(block.len());
            let rest = block.get(consumed..).unwrap_or_default();
            match self
                .zlib
                .decompress_vec(rest, &mut out, FlushDecompress::Sync)
            {
                Ok(Status::StreamEnd) => break,
                Ok(_) => {}
                Err(error) => match error.needs_dictionary() {
                    Some(_) => {
                        self.zlib
                            .set_dictionary(&DICTIONARY)
                            .map_err(|e| SpdyError::Headers(e.to_string()))?;
                        continue;
                    }
                    None => return Err(SpdyError::Headers(error.to_string())),
                },
            }
            let consumed = usize::try_from(self.zlib.total_in() - start).unwrap_or(block.len());
            if consumed >= block.len() && out.len() < out.capacity() {
                break;
            }
            if out.len() >= MAX_BLOCK {
                return Err(SpdyError::Headers("header block too large".to_owned()));
            }
            out.reserve(1024);
        }
        HeaderBlock::decode(&out)
    }
}
