//! Tests of the SPDY layer: golden frame bytes, header blocks through the shared zlib stream
//! with the dictionary (including blocks from Python's zlib, which Go's matches), and the
//! session's replies, ping echo, FIN and reset handling.

use bytes::{Bytes, BytesMut};

use super::dictionary::DICTIONARY;
use super::frame::{self, read_frame, Frame};
use super::headers::{HeaderBlock, HeaderDecoder, HeaderEncoder};
use super::Session;
use crate::streams::testkit::spdy_client;

fn block(pairs: &[(&str, &str)]) -> HeaderBlock {
    HeaderBlock(
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
    )
}

#[test]
fn dictionary_should_have_the_spdy3_length_and_adler32() {
    assert_eq!(DICTIONARY.len(), 1423);
    // zlib's Adler-32, the DICTID a SPDY/3 peer's header stream names.
    let (mut a, mut b) = (1u32, 0u32);
    for byte in DICTIONARY {
        a = (a + u32::from(byte)) % 65521;
        b = (b + a) % 65521;
    }
    assert_eq!(b << 16 | a, 0xe3c6_a7c2);
}

#[test]
fn control_frames_should_encode_to_golden_bytes() {
    let mut out = BytesMut::new();
    frame::ping(&mut out, 7);
    assert_eq!(&out[..], &[0x80, 3, 0, 6, 0, 0, 0, 4, 0, 0, 0, 7]);
    out.clear();
    frame::rst_stream(&mut out, 5, frame::RST_CANCEL);
    assert_eq!(
        &out[..],
        &[0x80, 3, 0, 3, 0, 0, 0, 8, 0, 0, 0, 5, 0, 0, 0, 5]
    );
    out.clear();
    frame::goaway(&mut out, 9);
    assert_eq!(
        &out[..],
        &[0x80, 3, 0, 7, 0, 0, 0, 8, 0, 0, 0, 9, 0, 0, 0, 0]
    );
    out.clear();
    frame::syn_reply(&mut out, 3, &[0xAA, 0xBB]);
    assert_eq!(
        &out[..],
        &[0x80, 3, 0, 2, 0, 0, 0, 6, 0, 0, 0, 3, 0xAA, 0xBB]
    );
    assert_eq!(
        frame::data_header(0x0102_0304, true, 0x050607),
        [1, 2, 3, 4, 1, 5, 6, 7]
    );
}

#[tokio::test]
async fn frames_should_read_back() {
    let mut out = BytesMut::new();
    frame::syn_stream(&mut out, 1, true, &[9, 9]);
    frame::ping(&mut out, 3);
    out.extend_from_slice(&frame::data_header(1, false, 3));
    out.extend_from_slice(b"abc");
    // SETTINGS (type 4) and WINDOW_UPDATE (type 9) are read and ignored.
    out.extend_from_slice(&[0x80, 3, 0, 4, 0, 0, 0, 4, 0, 0, 0, 0]);
    out.extend_from_slice(&[0x80, 3, 0, 9, 0, 0, 0, 8, 0, 0, 0, 1, 0, 0, 1, 0]);
    let mut input = &out[..];
    let headers = Bytes::from_static(&[9, 9]);
    assert_eq!(
        read_frame(&mut input).await.unwrap(),
        Some(Frame::SynStream {
            stream_id: 1,
            fin: true,
            headers
        })
    );
    assert_eq!(read_frame(&mut input).await.unwrap(), Some(Frame::Ping(3)));
    assert_eq!(
        read_frame(&mut input).await.unwrap(),
        Some(Frame::Data {
            stream_id: 1,
            fin: false,
            data: Bytes::from_static(b"abc")
        })
    );
    assert_eq!(read_frame(&mut input).await.unwrap(), Some(Frame::Settings));
    assert_eq!(
        read_frame(&mut input).await.unwrap(),
        Some(Frame::WindowUpdate)
    );
    assert_eq!(read_frame(&mut input).await.unwrap(), None);
}

#[test]
fn header_blocks_should_round_trip_through_one_zlib_stream() {
    let mut encoder = HeaderEncoder::new().unwrap();
    let mut decoder = HeaderDecoder::default();
    let first = block(&[("streamtype", "error"), ("port", "8080")]);
    let second = block(&[("streamtype", "data"), ("port", "8080"), ("requestid", "0")]);
    let a = encoder.encode(&first).unwrap();
    // zlib header naming a preset dictionary (FDICT) with the SPDY/3 DICTID.
    assert_eq!(&a[..6], &[0x78, 0xbb, 0xe3, 0xc6, 0xa7, 0xc2]);
    let b = encoder.encode(&second).unwrap();
    assert!(
        b.len() < a.len(),
        "the second block reuses the stream's history"
    );
    assert_eq!(decoder.decode(&a).unwrap(), first);
    assert_eq!(decoder.decode(&b).unwrap(), second);
    assert_eq!(
        decoder
            .decode(&encoder.encode(&HeaderBlock::default()).unwrap())
            .unwrap(),
        HeaderBlock::default()
    );
}

#[test]
fn header_blocks_from_a_standard_zlib_should_decode() {
    // Written by Python's zlib (the C zlib Go's compress/zlib is compatible with):
    // compressobj(zdict=SPDY/3 dictionary), each block then flush(Z_SYNC_FLUSH).
    let first: &[u8] = &[
        0x78, 0xbb, 0xe3, 0xc6, 0xa7, 0xc2, 0x02, 0x25, 0x3a, 0x70, 0x3a, 0x2b, 0x29, 0x4a, 0x4d,
        0xcc, 0x85, 0x16, 0x25, 0xac, 0xa9, 0xa0, 0x80, 0x86, 0x14, 0xcb, 0x45, 0xe0, 0x1c, 0x60,
        0x61, 0x60, 0x61, 0x00, 0xa4, 0x39, 0x8b, 0x20, 0xd1, 0x98, 0x09, 0x4a, 0xde, 0x8c, 0x06,
        0x00, 0x00, 0x00, 0x00, 0xff, 0xff,
    ];
    let second: &[u8] = &[
        0xc2, 0xaa, 0x19, 0x54, 0x0e, 0x25, 0x12, 0xd6, 0x0b, 0x00, 0x00, 0x00, 0xff, 0xff,
    ];
    let mut decoder = HeaderDecoder::default();
    let a = decoder.decode(first).unwrap();
    assert_eq!(
        a,
        block(&[
            ("streamtype", "error"),
            ("port", "8080"),
            ("requestid", "0")
        ])
    );
    assert_eq!(a.get("streamtype"), Some("error"));
    let b = decoder.decode(second).unwrap();
    assert_eq!(
        b,
        block(&[("streamtype", "data"), ("port", "8080"), ("requestid", "0")])
    );
}

#[tokio::test]
async fn session_should_reply_echo_pings_and_deliver_data_until_fin() {
    let (server, client) = tokio::io::duplex(1 << 20);
    let mut session = Session::start(server).unwrap();
    let (mut read, mut write) = spdy_client(client);

    write.open(1, false, &[("streamtype", "stdin")]).await;
    assert!(matches!(
        read.frame().await,
        Some(Frame::SynReply { stream_id: 1, .. })
    ));
    let mut stream = session.accept().await.unwrap();
    assert_eq!(stream.headers.get("streamtype"), Some("stdin"));

    write.ping(1).await;
    assert_eq!(read.frame().await, Some(Frame::Ping(1)));

    write.data(1, false, b"hello").await;
    write.data(1, true, b"").await;
    assert_eq!(
        stream.incoming.recv().await,
        Some(Bytes::from_static(b"hello"))
    );
    assert_eq!(stream.incoming.recv().await, None);

    stream
        .writer
        .write(Bytes::from_static(b"back"))
        .await
        .unwrap();
    stream.writer.close().await.unwrap();
    assert_eq!(
        read.frame().await,
        Some(Frame::Data {
            stream_id: 1,
            fin: false,
            data: Bytes::from_static(b"back")
        })
    );
    assert_eq!(
        read.frame().await,
        Some(Frame::Data {
            stream_id: 1,
            fin: true,
            data: Bytes::new()
        })
    );

    // A second stream, reset by the client: its inbound channel ends.
    write.open(3, false, &[("streamtype", "stdout")]).await;
    assert!(matches!(
        read.frame().await,
        Some(Frame::SynReply { stream_id: 3, .. })
    ));
    let mut second = session.accept().await.unwrap();
    let mut rst = BytesMut::new();
    frame::rst_stream(&mut rst, 3, frame::RST_CANCEL);
    tokio::io::AsyncWriteExt::write_all(write.raw(), &rst)
        .await
        .unwrap();
    assert_eq!(second.incoming.recv().await, None);

    let closing = tokio::spawn(session.close());
    assert!(matches!(
        read.frame().await,
        Some(Frame::GoAway { last_good: 3 })
    ));
    drop(write);
    drop(read);
    closing.await.unwrap();
}
