//! The RFC 6455 opening handshake, server side: recognising a WebSocket upgrade request,
//! the `Sec-WebSocket-Accept` key, and the client's offered subprotocols.

use base64::Engine as _;
use http::HeaderMap;

/// The GUID RFC 6455 appends to the client's key before hashing.
const ACCEPT_GUID: &str = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// `Sec-WebSocket-Accept` for a client's `Sec-WebSocket-Key`: base64(SHA-1(key + GUID)).
pub(crate) fn accept_key(key: &str) -> String {
    let mut input = String::with_capacity(key.len() + ACCEPT_GUID.len());
    input.push_str(key.trim());
    input.push_str(ACCEPT_GUID);
    let digest = ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, input.as_bytes());
    base64::engine::general_purpose::STANDARD.encode(digest.as_ref())
}

/// Whether the request asks for a WebSocket: `Upgrade: websocket` (any case) and a
/// `Connection` header listing `upgrade`.
pub(crate) fn is_websocket_request(headers: &HeaderMap) -> bool {
    header_lists(headers, http::header::UPGRADE).any(|v| v.eq_ignore_ascii_case("websocket"))
        && header_lists(headers, http::header::CONNECTION)
            .any(|v| v.eq_ignore_ascii_case("upgrade"))
}

/// The subprotocols the client offers, in its order of preference.
pub(crate) fn offered_protocols(headers: &HeaderMap) -> Vec<String> {
    header_lists(headers, http::header::SEC_WEBSOCKET_PROTOCOL)
        .map(str::to_owned)
        .collect()
}

/// Every comma-separated, trimmed, non-empty element of every value of `name`.
pub(crate) fn header_lists(
    headers: &HeaderMap,
    name: http::header::HeaderName,
) -> impl Iterator<Item = &str> {
    headers
        .get_all(name)
        .into_iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(str::trim)
        .filter(|value| !value.is_empty())
}
