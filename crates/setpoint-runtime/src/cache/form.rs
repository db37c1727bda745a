//! [`CacheForm`]: how a cache holds its objects — decoded, as `Arc<K>` (the default), or
//! compact, as LZ4-compressed JSON decoded on read — and the codec behind the compact form.
//!
//! Choose compact for big caches of big objects, where memory matters more than read cost: a
//! typical Pod is about 30 KB decoded (k8s-openapi holds every optional field inline) and about
//! 3.1 KB compact (2.6 KB of it compressed JSON). A compact read decodes the object (tens of
//! µs for a Pod) unless it is among the `recent` objects read or written last, which are kept
//! decoded.

use std::fmt;

use serde::de::DeserializeOwned;
use serde::Serialize;

/// How many decoded objects a compact cache keeps by default for repeated reads.
pub(crate) const DEFAULT_RECENT: usize = 256;

/// How a cache (an informer's [`ObjectCache`](crate::ObjectCache)) holds its objects. Set it with
/// [`InformerOptions::compact`](crate::InformerOptions::compact) or the `cache` field of
/// [`InformerOptions`](crate::InformerOptions).
///
/// - **Decoded** (the default): each object as the `Arc<K>` the watch delivered (after the
///   transform). A read is an `Arc` clone; nothing is ever decoded twice.
/// - **Compact**: each object as its JSON, LZ4-compressed, plus what reads filter on without
///   decoding — its key, labels and resource version, and its values in every index. A read
///   decodes the objects it returns, except the up to `recent` objects that were read (by a
///   lookup that returned few objects) or written by a watch event last, which are kept
///   decoded (a CLOCK cache). Reads return a fresh `Arc` per decode, so `Arc::ptr_eq` between
///   two reads of an unchanged object holds only while it stays in that small cache.
pub struct CacheForm<K> {
    kind: Kind<K>,
}

enum Kind<K> {
    Decoded,
    Compact { codec: Codec<K>, recent: usize },
}

impl<K> CacheForm<K> {
    /// Each object held decoded, as `Arc<K>` (the default).
    pub fn decoded() -> CacheForm<K> {
        CacheForm {
            kind: Kind::Decoded,
        }
    }

    /// Whether objects are held compact.
    pub fn is_compact(&self) -> bool {
        matches!(self.kind, Kind::Compact { .. })
    }

    /// How many decoded objects a compact cache keeps for repeated reads (0 when decoded).
    pub fn recent(&self) -> usize {
        match &self.kind {
            Kind::Decoded => 0,
            Kind::Compact { recent, .. } => *recent,
        }
    }

    /// The codec and recent-cache size if compact.
    pub(crate) fn compact_parts(&self) -> Option<(Codec<K>, usize)> {
        match &self.kind {
            Kind::Decoded => None,
            Kind::Compact { codec, recent } => Some((*codec, *recent)),
        }
    }
}

impl<K: Serialize + DeserializeOwned> CacheForm<K> {
    /// Each object held as LZ4-compressed JSON, with the 256 objects read or written last kept
    /// decoded.
    pub fn compact() -> CacheForm<K> {
        CacheForm::compact_with_recent(DEFAULT_RECENT)
    }

    /// Each object held as LZ4-compressed JSON, with the `recent` objects read or written last
    /// kept decoded (0: decode on every read).
    pub fn compact_with_recent(recent: usize) -> CacheForm<K> {
        CacheForm {
            kind: Kind::Compact {
                codec: Codec {
                    encode: encode::<K>,
                    decode: decode::<K>,
                },
                recent,
            },
        }
    }
}

impl<K> Default for CacheForm<K> {
    /// [`CacheForm::decoded`].
    fn default() -> Self {
        CacheForm::decoded()
    }
}

impl<K> Clone for CacheForm<K> {
    fn clone(&self) -> Self {
        CacheForm {
            kind: match &self.kind {
                Kind::Decoded => Kind::Decoded,
                Kind::Compact { codec, recent } => Kind::Compact {
                    codec: *codec,
                    recent: *recent,
                },
            },
        }
    }
}

impl<K> fmt::Debug for CacheForm<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            Kind::Decoded => f.write_str("Decoded"),
            Kind::Compact { recent, .. } => f
                .debug_struct("Compact")
                .field("recent", recent)
                .finish_non_exhaustive(),
        }
    }
}

/// Why an object could not be encoded or decoded.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CodecError {
    /// The object did not serialize to JSON, or its JSON did not deserialize.
    #[error("JSON")]
    Json(#[from] serde_json::Error),
    /// The compressed bytes were damaged.
    #[error("LZ4 decompression")]
    Lz4(#[from] lz4_flex::block::DecompressError),
}

/// Turns objects into compact bytes and back.
pub(crate) struct Codec<K> {
    encode: fn(&K) -> Result<Box<[u8]>, CodecError>,
    decode: fn(&[u8]) -> Result<K, CodecError>,
}

impl<K> Clone for Codec<K> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<K> Copy for Codec<K> {}

impl<K> Codec<K> {
    pub(crate) fn encode(&self, object: &K) -> Result<Box<[u8]>, CodecError> {
        (self.encode)(object)
    }

    pub(crate) fn decode(&self, bytes: &[u8]) -> Result<K, CodecError> {
        (self.decode)(bytes)
    }
}

fn encode<K: Serialize>(object: &K) -> Result<Box<[u8]>, CodecError> {
    let json = serde_json::to_vec(object)?;
    Ok(lz4_flex::block::compress_prepend_size(&json).into_boxed_slice())
}

fn decode<K: DeserializeOwned>(bytes: &[u8]) -> Result<K, CodecError> {
    let json = lz4_flex::block::decompress_size_prepended(bytes)?;
    Ok(serde_json::from_slice(&json)?)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;

    use super::*;

    #[test]
    fn codec_should_round_trip_an_object_and_reject_damaged_bytes() {
        let form = CacheForm::<ConfigMap>::compact();
        let (codec, recent) = form.compact_parts().expect("compact");
        assert_eq!(recent, DEFAULT_RECENT);
        let object = ConfigMap {
            metadata: ObjectMeta {
                name: Some("a".into()),
                ..Default::default()
            },
            data: Some([("k".to_string(), "v".repeat(500))].into()),
            ..Default::default()
        };
        let bytes = codec.encode(&object).expect("encodes");
        assert!(
            bytes.len() < 200,
            "500 repeated bytes compress: {}",
            bytes.len()
        );
        assert_eq!(codec.decode(&bytes).expect("decodes"), object);
        assert!(codec.decode(&bytes[..bytes.len() / 2]).is_err());
        assert!(!CacheForm::<ConfigMap>::default().is_compact());
    }

    /// Round-trips `object` through the compact codec of its type.
    fn round_trip<K: Serialize + DeserializeOwned>(object: &K) -> K {
        let (codec, _) = CacheForm::<K>::compact().compact_parts().expect("compact");
        codec
            .decode(&codec.encode(object).expect("encodes"))
            .expect("decodes")
    }

    #[test]
    fn codec_should_round_trip_dynamic_and_metadata_only_objects() {
        let meta = ObjectMeta {
            namespace: Some("ns".into()),
            name: Some("a".into()),
            labels: Some([("app".to_string(), "web".to_string())].into()),
            ..Default::default()
        };
        let resource = kube::api::ApiResource::erase::<ConfigMap>(&());
        let mut dynamic = kube::api::DynamicObject::new("a", &resource).within("ns");
        dynamic.data = serde_json::json!({"data": {"k": "v"}});
        let back = round_trip(&dynamic);
        assert_eq!((back.metadata, back.data), (dynamic.metadata, dynamic.data));
        let partial = kube::api::PartialObjectMeta::<ConfigMap> {
            types: Some(kube::api::TypeMeta {
                api_version: "meta.k8s.io/v1".into(),
                kind: "PartialObjectMetadata".into(),
            }),
            metadata: meta,
            ..Default::default()
        };
        let back = round_trip(&partial);
        assert_eq!(
            (back.types, back.metadata),
            (partial.types, partial.metadata)
        );
    }
}
