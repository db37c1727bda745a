//! Tests of [`read_logs`](super::read_logs) on log files written by the tests.

use std::path::Path;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::StreamExt as _;

use super::options::{RunChoice, Timestamps};
use super::record::{encode, Tag};
use super::*;

const T0: &str = "2026-01-01T00:00:00.000000000Z";
const T1: &str = "2026-01-01T00:00:01.000000000Z";
const T2: &str = "2026-01-01T00:00:02.500000000Z";

/// Appends records to run `n` of container `c`.
fn append(pod: &Path, n: u32, records: &[(&str, LogStream, Tag, &str)]) {
    let path = container_log(pod, "c", n);
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    let mut out = Vec::new();
    for (time, stream, tag, text) in records {
        encode(&mut out, time, *stream, *tag, text.as_bytes());
    }
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .expect("open");
    std::io::Write::write_all(&mut file, &out).expect("write");
}

fn three_lines(pod: &Path, n: u32) {
    append(
        pod,
        n,
        &[
            (T0, LogStream::Stdout, Tag::Full, "line 1"),
            (T1, LogStream::Stderr, Tag::Partial, "line "),
            (T1, LogStream::Stderr, Tag::Full, "2"),
            (T2, LogStream::Stdout, Tag::Full, "line 3"),
        ],
    );
}

async fn read(pod: &Path, options: LogOptions) -> Result<String, LogError> {
    let mut body = read_logs(pod, "p", "c", options).await?;
    let mut text = Vec::new();
    while let Some(chunk) = body.next().await {
        text.extend_from_slice(&chunk.expect("a chunk"));
    }
    Ok(String::from_utf8(text).expect("utf-8"))
}

fn time(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s)
        .expect("time")
        .with_timezone(&Utc)
}

#[tokio::test]
async fn read_should_join_partial_records_and_drop_the_framing() {
    let dir = tempfile::tempdir().expect("tempdir");
    three_lines(dir.path(), 0);
    let text = read(dir.path(), LogOptions::default()).await.expect("log");
    assert_eq!(text, "line 1\nline 2\nline 3\n");
}

#[tokio::test]
async fn read_should_prefix_timestamps_when_asked() {
    let dir = tempfile::tempdir().expect("tempdir");
    three_lines(dir.path(), 0);
    let options = LogOptions {
        timestamps: Timestamps::Show,
        tail_lines: Some(1),
        ..LogOptions::default()
    };
    let text = read(dir.path(), options).await.expect("log");
    assert_eq!(text, format!("{T2} line 3\n"));
}

#[tokio::test]
async fn read_should_keep_the_last_tail_lines() {
    let dir = tempfile::tempdir().expect("tempdir");
    three_lines(dir.path(), 0);
    let tail = |n| LogOptions {
        tail_lines: Some(n),
        ..LogOptions::default()
    };
    assert_eq!(read(dir.path(), tail(0)).await.expect("log"), "");
    assert_eq!(read(dir.path(), tail(1)).await.expect("log"), "line 3\n");
    // Records are counted as the kubelet counts them: a partial record is a line of the file.
    assert_eq!(read(dir.path(), tail(2)).await.expect("log"), "2\nline 3\n");
    assert_eq!(
        read(dir.path(), tail(100)).await.expect("log"),
        "line 1\nline 2\nline 3\n"
    );
}

#[tokio::test]
async fn tail_should_work_across_read_chunks() {
    let dir = tempfile::tempdir().expect("tempdir");
    let long = "x".repeat(1000);
    let records: Vec<_> = (0..200)
        .map(|_| (T0, LogStream::Stdout, Tag::Full, long.as_str()))
        .collect();
    append(dir.path(), 0, &records);
    append(dir.path(), 0, &[(T1, LogStream::Stdout, Tag::Full, "last")]);
    let options = LogOptions {
        tail_lines: Some(70),
        ..LogOptions::default()
    };
    let text = read(dir.path(), options).await.expect("log");
    assert_eq!(text.lines().count(), 70);
    assert!(text.ends_with(&format!("{long}\nlast\n")));
}

#[tokio::test]
async fn read_should_skip_lines_before_since() {
    let dir = tempfile::tempdir().expect("tempdir");
    three_lines(dir.path(), 0);
    let options = LogOptions {
        since: Some(time("2026-01-01T00:00:01Z")),
        ..LogOptions::default()
    };
    assert_eq!(
        read(dir.path(), options).await.expect("log"),
        "line 2\nline 3\n"
    );
}

#[tokio::test]
async fn read_should_stop_at_limit_bytes_even_mid_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    three_lines(dir.path(), 0);
    let options = LogOptions {
        limit_bytes: Some(10),
        ..LogOptions::default()
    };
    assert_eq!(read(dir.path(), options).await.expect("log"), "line 1\nlin");
}

#[tokio::test]
async fn read_should_serve_the_newest_run_or_the_one_before() {
    let dir = tempfile::tempdir().expect("tempdir");
    append(
        dir.path(),
        0,
        &[(T0, LogStream::Stdout, Tag::Full, "first run")],
    );
    append(
        dir.path(),
        1,
        &[(T1, LogStream::Stdout, Tag::Full, "second run")],
    );
    append(
        dir.path(),
        2,
        &[(T2, LogStream::Stdout, Tag::Full, "third run")],
    );
    assert_eq!(
        read(dir.path(), LogOptions::default()).await.expect("log"),
        "third run\n"
    );
    let previous = LogOptions {
        run: RunChoice::Previous,
        ..LogOptions::default()
    };
    assert_eq!(
        read(dir.path(), previous).await.expect("log"),
        "second run\n"
    );
}

#[tokio::test]
async fn read_should_say_waiting_to_start_or_no_previous_like_the_kubelet() {
    let dir = tempfile::tempdir().expect("tempdir");
    let err = read(dir.path(), LogOptions::default())
        .await
        .expect_err("no log");
    assert_eq!(
        err.to_string(),
        "container \"c\" in pod \"p\" is waiting to start: ContainerCreating"
    );
    three_lines(dir.path(), 0);
    let previous = LogOptions {
        run: RunChoice::Previous,
        ..LogOptions::default()
    };
    let err = read(dir.path(), previous).await.expect_err("one run only");
    assert_eq!(
        err.to_string(),
        "previous terminated container \"c\" in pod \"p\" not found"
    );
}

#[tokio::test]
async fn follow_should_stream_new_lines_until_the_exit_record_and_drain() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pod = dir.path().to_owned();
    append(&pod, 0, &[(T0, LogStream::Stdout, Tag::Full, "before")]);
    let options = LogOptions {
        follow: true,
        ..LogOptions::default()
    };
    let mut body = read_logs(&pod, "p", "c", options).await.expect("log");
    let first = tokio::time::timeout(Duration::from_secs(30), body.next())
        .await
        .expect("the first chunk in time")
        .expect("a chunk")
        .expect("ok");
    assert_eq!(&first[..], b"before\n");
    // A line written later arrives while following.
    append(&pod, 0, &[(T1, LogStream::Stdout, Tag::Full, "later")]);
    let second = tokio::time::timeout(Duration::from_secs(30), body.next())
        .await
        .expect("the new line in time")
        .expect("a chunk")
        .expect("ok");
    assert_eq!(&second[..], b"later\n");
    // The run ends: its last line and exit record are written together; the stream drains
    // that line and ends.
    append(&pod, 0, &[(T2, LogStream::Stdout, Tag::Full, "last")]);
    std::fs::write(exit_record(&pod, "c", 0), "{}").expect("exit record");
    let rest = tokio::time::timeout(Duration::from_secs(30), async {
        let mut rest = Vec::new();
        while let Some(chunk) = body.next().await {
            rest.extend_from_slice(&chunk.expect("ok"));
        }
        rest
    })
    .await
    .expect("the stream ends after the exit record");
    assert_eq!(rest, b"last\n");
}

#[tokio::test]
async fn follow_should_end_when_a_newer_run_starts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pod = dir.path().to_owned();
    append(&pod, 0, &[(T0, LogStream::Stdout, Tag::Full, "run 0")]);
    let options = LogOptions {
        follow: true,
        ..LogOptions::default()
    };
    let mut body = read_logs(&pod, "p", "c", options).await.expect("log");
    append(&pod, 1, &[(T1, LogStream::Stdout, Tag::Full, "run 1")]);
    let all = tokio::time::timeout(Duration::from_secs(30), async {
        let mut all = Vec::new();
        while let Some(chunk) = body.next().await {
            all.extend_from_slice(&chunk.expect("ok"));
        }
        all
    })
    .await
    .expect("the stream ends once run 1 exists");
    assert_eq!(all, b"run 0\n");
}
