//! One line of a container log file: `<RFC3339Nano UTC> <stream> <F|P> <text>`.

use chrono::{DateTime, SecondsFormat, Utc};

use super::writer::LogStream;

/// Whether a record ends a line of the container's output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tag {
    /// `F`: the text is the (last piece of a) line; a newline followed it.
    Full,
    /// `P`: the text is a piece of a line that goes on in a later record.
    Partial,
}

impl Tag {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Tag::Full => "F",
            Tag::Partial => "P",
        }
    }
}

/// A parsed record, borrowing the text from the file's line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Record<'a> {
    pub(crate) time: DateTime<Utc>,
    /// The timestamp as written (echoed by `timestamps=true`).
    pub(crate) time_text: &'a [u8],
    pub(crate) stream: LogStream,
    pub(crate) tag: Tag,
    /// Without the record's trailing newline.
    pub(crate) text: &'a [u8],
}

/// Formats a timestamp as records carry it: RFC 3339 in UTC with nanoseconds.
pub(crate) fn format_time(time: DateTime<Utc>) -> String {
    time.to_rfc3339_opts(SecondsFormat::Nanos, true)
}

/// Appends the record for `text` (which has no newline) to `out`.
pub(crate) fn encode(out: &mut Vec<u8>, time: &str, stream: LogStream, tag: Tag, text: &[u8]) {
    out.extend_from_slice(time.as_bytes());
    out.push(b' ');
    out.extend_from_slice(stream.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(tag.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(text);
    out.push(b'\n');
}

/// Parses one line of a log file (with or without its newline); `None` if it is not a record.
pub(crate) fn parse(line: &[u8]) -> Option<Record<'_>> {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let mut fields = line.splitn(4, |b| *b == b' ');
    let time_text = fields.next()?;
    let stream = match fields.next()? {
        b"stdout" => LogStream::Stdout,
        b"stderr" => LogStream::Stderr,
        _ => return None,
    };
    let tag = match fields.next()? {
        b"F" => Tag::Full,
        b"P" => Tag::Partial,
        _ => return None,
    };
    let text = fields.next().unwrap_or_default();
    let time = DateTime::parse_from_rfc3339(std::str::from_utf8(time_text).ok()?)
        .ok()?
        .with_timezone(&Utc);
    Some(Record {
        time,
        time_text,
        stream,
        tag,
        text,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_should_read_back_what_encode_wrote() {
        let mut out = Vec::new();
        let time = format_time(Utc::now());
        encode(&mut out, &time, LogStream::Stderr, Tag::Partial, b"a b  c");
        let record = parse(&out).expect("a record");
        assert_eq!(record.stream, LogStream::Stderr);
        assert_eq!(record.tag, Tag::Partial);
        assert_eq!(record.text, b"a b  c");
        assert_eq!(record.time_text, time.as_bytes());
    }

    #[test]
    fn parse_should_accept_an_empty_line_and_refuse_garbage() {
        let record = parse(b"2026-01-02T03:04:05.000000006Z stdout F \n").expect("a record");
        assert_eq!(record.text, b"");
        assert_eq!(record.time.timestamp_subsec_nanos(), 6);
        assert!(parse(b"2026-01-02T03:04:05Z stdout F").is_some());
        assert!(parse(b"yesterday stdout F hello").is_none());
        assert!(parse(b"2026-01-02T03:04:05Z stdin F hello").is_none());
        assert!(parse(b"").is_none());
    }
}
