//! The Kubernetes WebSocket channel protocols: which subprotocol a client offers and we
//! pick, and how a channel's bytes travel in a message — binary `[channel, payload…]`, or for
//! the base64 variants text `'0'+channel` followed by base64(payload). `v5.channel.k8s.io`
//! adds the CLOSE signal `[255, channel]` (half-close of a client channel).

use base64::Engine as _;
use bytes::Bytes;

use super::ws::{Message, WsSender};

/// The WebSocket subprotocols we speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ChannelProtocol {
    /// `v5.channel.k8s.io`: v4 plus the CLOSE signal (remote command only).
    V5,
    /// `v4.channel.k8s.io`: binary channels, the error channel carries a `Status`.
    V4,
    /// `v4.base64.channel.k8s.io`.
    V4Base64,
    /// `channel.k8s.io`: binary channels, the error channel carries text.
    V1,
    /// `base64.channel.k8s.io`.
    V1Base64,
    /// No subprotocol offered: binary channels as `channel.k8s.io`.
    Unnamed,
}

/// What the connection is for: the two accept different subprotocol sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ChannelUse {
    /// `exec` / `attach`.
    RemoteCommand,
    /// `portforward` (never v5, as the kubelet: a client offering v5 then v4 gets v4).
    PortForward,
}

/// The CLOSE signal's marker byte (v5).
const CLOSE_SIGNAL: u8 = 255;

impl ChannelProtocol {
    /// The name on the wire (`Sec-WebSocket-Protocol`); empty for [`Self::Unnamed`].
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::V5 => "v5.channel.k8s.io",
            Self::V4 => "v4.channel.k8s.io",
            Self::V4Base64 => "v4.base64.channel.k8s.io",
            Self::V1 => "channel.k8s.io",
            Self::V1Base64 => "base64.channel.k8s.io",
            Self::Unnamed => "",
        }
    }

    /// Picks the first of the client's offers we speak for `usage`; no offers at all means
    /// [`Self::Unnamed`]; offers none of which we speak mean `None`.
    pub(crate) fn negotiate(offers: &[String], usage: ChannelUse) -> Option<Self> {
        if offers.is_empty() {
            return Some(Self::Unnamed);
        }
        let supported: &[Self] = match usage {
            ChannelUse::RemoteCommand => {
                &[Self::V5, Self::V4, Self::V4Base64, Self::V1, Self::V1Base64]
            }
            ChannelUse::PortForward => &[Self::V4, Self::V4Base64],
        };
        offers.iter().find_map(|offer| {
            supported
                .iter()
                .copied()
                .find(|protocol| protocol.name() == offer.as_str())
        })
    }

    /// Base64 text framing.
    pub(crate) fn is_base64(self) -> bool {
        matches!(self, Self::V4Base64 | Self::V1Base64)
    }

    /// The error channel carries a JSON `Status` (v4, v5) rather than text.
    pub(crate) fn status_errors(self) -> bool {
        matches!(self, Self::V5 | Self::V4 | Self::V4Base64)
    }

    /// Clients may half-close a channel with the CLOSE signal.
    pub(crate) fn has_close_signal(self) -> bool {
        self == Self::V5
    }

    /// Sends `payload` on `channel`.
    pub(crate) async fn send(
        self,
        sender: &WsSender,
        channel: u8,
        payload: Bytes,
    ) -> Result<(), super::ws::conn::Closed> {
        if self.is_base64() {
            let encoded = base64::engine::general_purpose::STANDARD.encode(&payload);
            let mut text = Vec::with_capacity(encoded.len() + 1);
            text.push(b'0' + channel);
            text.extend_from_slice(encoded.as_bytes());
            sender.text(Bytes::from(text)).await
        } else {
            sender.binary(Some(channel), payload).await
        }
    }

    /// Decodes a client message. Text and binary frames are read alike (as the kubelet's
    /// `wsstream` does): the Python client sends `str` data as text frames.
    pub(crate) fn decode(self, message: Message) -> Incoming {
        let (Message::Binary(bytes) | Message::Text(bytes)) = message;
        let Some((&first, rest)) = bytes.split_first() else {
            return Incoming::Ignored;
        };
        if self.is_base64() {
            let Some(channel) = first.checked_sub(b'0') else {
                return Incoming::Ignored;
            };
            return match base64::engine::general_purpose::STANDARD.decode(rest) {
                Ok(data) => Incoming::Data(channel, Bytes::from(data)),
                Err(_) => Incoming::Ignored,
            };
        }
        if self.has_close_signal() && first == CLOSE_SIGNAL {
            return match rest {
                &[closed] => Incoming::Close(closed),
                _ => Incoming::Ignored,
            };
        }
        Incoming::Data(first, bytes.slice(1..))
    }
}

/// A decoded client message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Incoming {
    /// Bytes on a channel.
    Data(u8, Bytes),
    /// The v5 CLOSE signal for a channel.
    Close(u8),
    /// Empty, malformed, or in the framing the protocol does not use.
    Ignored,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offers(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| (*n).to_owned()).collect()
    }

    #[test]
    fn negotiate_should_pick_the_first_offer_spoken_for_the_use() {
        use ChannelProtocol as P;
        let v5v4 = offers(&["v5.channel.k8s.io", "v4.channel.k8s.io"]);
        assert_eq!(P::negotiate(&v5v4, ChannelUse::RemoteCommand), Some(P::V5));
        // Port-forward never speaks v5 (Python offers v5 then v4 for both).
        assert_eq!(P::negotiate(&v5v4, ChannelUse::PortForward), Some(P::V4));
        let old = offers(&["bogus", "base64.channel.k8s.io", "channel.k8s.io"]);
        assert_eq!(
            P::negotiate(&old, ChannelUse::RemoteCommand),
            Some(P::V1Base64)
        );
        assert_eq!(P::negotiate(&old, ChannelUse::PortForward), None);
        assert_eq!(P::negotiate(&[], ChannelUse::PortForward), Some(P::Unnamed));
        assert_eq!(
            P::negotiate(
                &offers(&["v4.base64.channel.k8s.io"]),
                ChannelUse::RemoteCommand
            ),
            Some(P::V4Base64)
        );
    }

    #[test]
    fn decode_should_read_binary_base64_and_v5_close() {
        use ChannelProtocol as P;
        let binary = Message::Binary(Bytes::from_static(b"\x00abc"));
        assert_eq!(
            P::V4.decode(binary.clone()),
            Incoming::Data(0, Bytes::from_static(b"abc"))
        );
        assert_eq!(P::V4Base64.decode(binary), Incoming::Ignored);
        let text = Message::Text(Bytes::from_static(b"4eyJXaWR0aCI6MX0="));
        assert_eq!(
            P::V4Base64.decode(text),
            Incoming::Data(4, Bytes::from_static(b"{\"Width\":1}"))
        );
        let close = Message::Binary(Bytes::from_static(&[255, 0]));
        assert_eq!(P::V5.decode(close.clone()), Incoming::Close(0));
        // Before v5, 255 is just a channel number.
        assert_eq!(
            P::V4.decode(close),
            Incoming::Data(255, Bytes::from_static(&[0]))
        );
        assert_eq!(
            P::V5.decode(Message::Binary(Bytes::new())),
            Incoming::Ignored
        );
    }
}
