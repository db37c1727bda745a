//! Choosing the protocol from an upgrade request's headers and writing the answer: `101`
//! with the WebSocket or SPDY headers, or a `Status` refusing the upgrade.

use bytes::Bytes;
use http::{header, HeaderMap, HeaderValue, Response, StatusCode};
use http_body_util::{BodyExt as _, Full};

use setpoint_core::{ApiError, Reason};

use super::channels::{ChannelProtocol, ChannelUse};
use super::ws::handshake::{accept_key, header_lists, is_websocket_request, offered_protocols};
use super::Body;

/// The WebSocket subprotocol of SPDY/3.1 tunnelled in WebSocket for port-forward.
pub(crate) const TUNNEL_PROTOCOL: &str = "SPDY/3.1+portforward.k8s.io";
/// The SPDY port-forward protocol version.
pub(crate) const PORT_FORWARD_PROTOCOL: &str = "portforward.k8s.io";
/// `X-Stream-Protocol-Version`.
const STREAM_PROTOCOL: &str = "x-stream-protocol-version";

/// A remote-command protocol version over SPDY.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum SpdyVersion {
    /// `channel.k8s.io`.
    V1,
    /// `v2.channel.k8s.io`.
    V2,
    /// `v3.channel.k8s.io`: adds resize.
    V3,
    /// `v4.channel.k8s.io` (and `v5.channel.k8s.io`, which over SPDY means the same).
    V4,
}

/// SPDY remote-command versions, by name, that we accept.
const SPDY_VERSIONS: [(&str, SpdyVersion); 5] = [
    ("v5.channel.k8s.io", SpdyVersion::V4),
    ("v4.channel.k8s.io", SpdyVersion::V4),
    ("v3.channel.k8s.io", SpdyVersion::V3),
    ("v2.channel.k8s.io", SpdyVersion::V2),
    ("channel.k8s.io", SpdyVersion::V1),
];

/// What a request asks to be upgraded to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Offer {
    /// A WebSocket with a channel protocol.
    WebSocket(ChannelProtocol),
    /// A WebSocket carrying a SPDY session (port-forward).
    Tunnel,
    /// SPDY/3.1 with a negotiated `X-Stream-Protocol-Version` (its name).
    Spdy(&'static str),
}

/// Reads the request's upgrade offer for `usage`, or the refusal to answer with.
pub(crate) fn negotiate(headers: &HeaderMap, usage: ChannelUse) -> Result<Offer, Response<Body>> {
    if is_websocket_request(headers) {
        if headers.get(header::SEC_WEBSOCKET_KEY).is_none() {
            return Err(refuse(ApiError::bad_request(
                "unable to upgrade: missing Sec-WebSocket-Key",
            )));
        }
        let offers = offered_protocols(headers);
        if usage == ChannelUse::PortForward && offers.iter().any(|o| o == TUNNEL_PROTOCOL) {
            return Ok(Offer::Tunnel);
        }
        return ChannelProtocol::negotiate(&offers, usage)
            .map(Offer::WebSocket)
            .ok_or_else(|| {
                refuse(ApiError::bad_request(format!(
                    "unable to upgrade: none of the requested websocket protocols {offers:?} is supported"
                )))
            });
    }
    let spdy = header_lists(headers, header::UPGRADE).any(|v| v.eq_ignore_ascii_case("spdy/3.1"))
        && header_lists(headers, header::CONNECTION).any(|v| v.eq_ignore_ascii_case("upgrade"));
    if !spdy {
        return Err(refuse(ApiError::bad_request("Upgrade request required")));
    }
    let offers: Vec<&str> =
        header_lists(headers, header::HeaderName::from_static(STREAM_PROTOCOL)).collect();
    if offers.is_empty() {
        return Err(refuse(ApiError::bad_request(
            "unable to upgrade: header X-Stream-Protocol-Version does not exist in request",
        )));
    }
    let supported: Vec<&'static str> = match usage {
        ChannelUse::RemoteCommand => SPDY_VERSIONS.iter().map(|(name, _)| *name).collect(),
        ChannelUse::PortForward => vec![PORT_FORWARD_PROTOCOL],
    };
    match offers
        .iter()
        .find_map(|offer| supported.iter().find(|name| *name == offer))
    {
        Some(name) => Ok(Offer::Spdy(name)),
        None => {
            let mut response = refuse(ApiError::new(
                Reason::Forbidden,
                format!("unable to upgrade: unable to negotiate protocol: client supports {offers:?}, server supports {supported:?}"),
            ));
            for name in supported {
                response.headers_mut().append(
                    "x-accepted-stream-protocol-versions",
                    HeaderValue::from_static(name),
                );
            }
            Err(response)
        }
    }
}

/// The remote-command version a negotiated SPDY protocol name stands for.
pub(crate) fn spdy_version(name: &str) -> SpdyVersion {
    SPDY_VERSIONS
        .iter()
        .find(|(known, _)| *known == name)
        .map_or(SpdyVersion::V1, |(_, version)| *version)
}

/// The `101` answer for `offer`.
pub(crate) fn switching(headers: &HeaderMap, offer: &Offer) -> Response<Body> {
    let mut response = Response::new(empty());
    *response.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let out = response.headers_mut();
    out.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    match offer {
        Offer::WebSocket(_) | Offer::Tunnel => {
            out.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
            let key = headers
                .get(header::SEC_WEBSOCKET_KEY)
                .and_then(|key| key.to_str().ok())
                .unwrap_or_default();
            if let Ok(accept) = HeaderValue::from_str(&accept_key(key)) {
                out.insert(header::SEC_WEBSOCKET_ACCEPT, accept);
            }
            let protocol = match offer {
                Offer::WebSocket(protocol) => protocol.name(),
                _ => TUNNEL_PROTOCOL,
            };
            if !protocol.is_empty() {
                out.insert(
                    header::SEC_WEBSOCKET_PROTOCOL,
                    HeaderValue::from_static(protocol),
                );
            }
        }
        Offer::Spdy(name) => {
            out.insert(header::UPGRADE, HeaderValue::from_static("SPDY/3.1"));
            out.insert(STREAM_PROTOCOL, HeaderValue::from_static(name));
        }
    }
    response
}

/// A `Status` response refusing the upgrade.
pub(crate) fn refuse(error: ApiError) -> Response<Body> {
    let mut response = Response::new(
        Full::new(Bytes::from(error.to_body()))
            .map_err(|never| match never {})
            .boxed(),
    );
    *response.status_mut() =
        StatusCode::from_u16(error.code()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

fn empty() -> Body {
    Full::new(Bytes::new())
        .map_err(|never| match never {})
        .boxed()
}
