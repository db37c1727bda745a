//! Tests of the WebSocket layer: the accept key, reading masked and fragmented client
//! messages, control frames between fragments, oversized messages, the writer's framing.

use bytes::Bytes;

use super::frame::{apply_mask, encode_header, Opcode};
use super::handshake::{accept_key, is_websocket_request, offered_protocols};
use super::{split, Message, WsError};
use crate::streams::testkit::{WsRead, WsWrite};

#[test]
fn accept_key_should_match_rfc_6455_example() {
    assert_eq!(
        accept_key("dGhlIHNhbXBsZSBub25jZQ=="),
        "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
    );
}

#[test]
fn handshake_should_recognise_upgrade_and_list_offers_in_order() {
    let mut headers = http::HeaderMap::new();
    headers.insert("upgrade", "WebSocket".parse().unwrap());
    headers.insert("connection", "keep-alive, Upgrade".parse().unwrap());
    headers.append(
        "sec-websocket-protocol",
        "v5.channel.k8s.io, v4.channel.k8s.io".parse().unwrap(),
    );
    headers.append("sec-websocket-protocol", "channel.k8s.io".parse().unwrap());
    assert!(is_websocket_request(&headers));
    assert_eq!(
        offered_protocols(&headers),
        ["v5.channel.k8s.io", "v4.channel.k8s.io", "channel.k8s.io"]
    );
    headers.insert("connection", "keep-alive".parse().unwrap());
    assert!(!is_websocket_request(&headers));
}

#[test]
fn mask_should_be_its_own_inverse_in_pieces() {
    let original: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
    let mask = [1, 2, 3, 4];
    let mut data = original.clone();
    apply_mask(&mut data, mask, 0);
    assert_ne!(data, original);
    let expected: Vec<u8> = original
        .iter()
        .enumerate()
        .map(|(i, b)| b ^ mask[i % 4])
        .collect();
    assert_eq!(data, expected);
    // Unmasking in two pieces at an odd offset gives the original back.
    let (a, b) = data.split_at_mut(13);
    apply_mask(a, mask, 0);
    apply_mask(b, mask, 13);
    assert_eq!(data, original);
}

#[test]
fn header_should_use_the_shortest_length_form() {
    assert_eq!(encode_header(true, Opcode::Binary, 5).0[..2], [0x82, 5]);
    let (head, used) = encode_header(true, Opcode::Text, 300);
    assert_eq!((used, &head[..4]), (4, &[0x81, 126, 1, 44][..]));
    let (head, used) = encode_header(false, Opcode::Binary, 70_000);
    assert_eq!(used, 10);
    assert_eq!(head[..2], [0x02, 127]);
    assert_eq!(u64::from_be_bytes(head[2..10].try_into().unwrap()), 70_000);
}

#[tokio::test]
async fn reader_should_reassemble_fragments_around_a_ping_and_answer_it() {
    let (server, client) = tokio::io::duplex(1 << 20);
    let (mut reader, sender, writer) = split(server, 1 << 20);
    let (client_read, client_write) = tokio::io::split(client);
    let (mut read, mut write) = (WsRead(client_read), WsWrite(client_write));

    write.binary(b"\x01hello").await;
    assert_eq!(
        reader.next().await.unwrap(),
        Some(Message::Binary(Bytes::from_static(b"\x01hello")))
    );
    // A fragmented text message with a ping between its fragments; large enough for the
    // 16-bit length form.
    let big = vec![b'x'; 1000];
    write.frame(0x1, false, b"abc").await;
    write.frame(0x9, true, b"ping!").await;
    write.frame(0x0, false, &big).await;
    write.frame(0x0, true, b"def").await;
    let mut expected = b"abc".to_vec();
    expected.extend_from_slice(&big);
    expected.extend_from_slice(b"def");
    assert_eq!(
        reader.next().await.unwrap(),
        Some(Message::Text(Bytes::from(expected)))
    );
    assert_eq!(read.frame().await, Some((0xA, b"ping!".to_vec())));

    sender
        .binary(Some(7), Bytes::from_static(b"out"))
        .await
        .unwrap();
    assert_eq!(read.frame().await, Some((0x2, b"\x07out".to_vec())));

    // The client's close is answered with the same code; the reader then ends.
    write.frame(0x8, true, &1000u16.to_be_bytes()).await;
    assert_eq!(reader.next().await.unwrap(), None);
    assert_eq!(
        read.frame().await,
        Some((0x8, 1000u16.to_be_bytes().to_vec()))
    );
    drop(sender);
    drop(reader);
    writer.await.unwrap();
    assert_eq!(read.frame().await, None);
}

#[tokio::test]
async fn reader_should_close_1009_on_an_oversized_message() {
    let (server, client) = tokio::io::duplex(1 << 20);
    let (mut reader, _sender, _writer) = split(server, 100);
    let (client_read, client_write) = tokio::io::split(client);
    let (mut read, mut write) = (WsRead(client_read), WsWrite(client_write));
    // Two fragments, each under the limit, together over it.
    write.frame(0x2, false, &[0; 60]).await;
    write.frame(0x0, true, &[0; 60]).await;
    assert!(matches!(reader.next().await, Err(WsError::TooBig(100))));
    assert_eq!(
        read.frame().await,
        Some((0x8, 1009u16.to_be_bytes().to_vec()))
    );
}

#[tokio::test]
async fn reader_should_refuse_unmasked_frames_with_1002() {
    let (server, client) = tokio::io::duplex(1 << 16);
    let (mut reader, _sender, _writer) = split(server, 100);
    let (client_read, mut client_write) = tokio::io::split(client);
    tokio::io::AsyncWriteExt::write_all(&mut client_write, &[0x82, 1, 0])
        .await
        .unwrap();
    assert!(matches!(reader.next().await, Err(WsError::Protocol(_))));
    assert_eq!(
        WsRead(client_read).frame().await,
        Some((0x8, 1002u16.to_be_bytes().to_vec()))
    );
}
