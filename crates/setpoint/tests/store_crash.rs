//! Crash test of the embedded store: a `setpoint debug store-writer` process writes with 8
//! concurrent writers and is killed with SIGKILL at a random moment, over and over on the same
//! data directory; in half the rounds it compacts, snapshots and rotates log segments
//! aggressively, so that kills land in those too. After each kill the store is reopened in this
//! process and must hold every acknowledged write:
//!
//! - it opens;
//! - each key is as its last acknowledged write left it (same mod revision, same value), except
//!   that each writer may be one unacknowledged write further (it was in flight at the kill);
//!   an acknowledged write is never lost, a deleted key never comes back at an older revision;
//! - the current revision is at least every acknowledged revision and never goes backwards
//!   between restarts;
//! - every value reads back whole, with a valid checksum, under the key it was written to.
//!
//! Randomness is seeded: the seed is printed, and `SETPOINT_SEED=<seed>` replays the choices
//! (not the timing). The value format mirrors `src/debug/crash_value.rs`, parsed independently.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use setpoint_store::{EmbeddedConfig, EmbeddedStore, KeyValue, ListRequest, Store};

/// Kill-and-check rounds.
const ROUNDS: usize = 25;
/// No new round starts after this long, to keep the test's time bounded on slow machines.
const TIME_LIMIT: Duration = Duration::from_secs(40);
/// Concurrent writers in the child; writer `w` owns `/crash/w{w}/k0` to `k7`.
const WRITERS: usize = 8;
/// Keys per writer.
const KEYS_PER_WRITER: usize = 8;
/// How long the child may take to open the store and report `ready`.
const READY_TIMEOUT: Duration = Duration::from_secs(30);

#[test]
fn store_should_keep_every_acknowledged_write_across_kills() {
    let seed = std::env::var("SETPOINT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64)
        });
    eprintln!("store_crash: seed {seed} (replay with SETPOINT_SEED={seed})");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");

    let mut rng = SmallRng::seed_from_u64(seed);
    let mut model = Model::default();
    let started = Instant::now();
    let mut total_acks = 0;
    for round in 0..ROUNDS {
        if started.elapsed() > TIME_LIMIT {
            eprintln!("store_crash: time limit reached after {round} rounds");
            break;
        }
        let result = run_round(dir.path(), &mut rng).and_then(|outcome| {
            total_acks += outcome.acks.len();
            let summary = runtime.block_on(check(dir.path(), &mut model, &outcome))?;
            eprintln!(
                "store_crash: round {round}: {}; {summary}",
                outcome.describe()
            );
            Ok(())
        });
        if let Err(message) = result {
            let kept = dir.keep();
            panic!(
                "store_crash round {round} failed (seed {seed}, data kept in {}): {message}",
                kept.display()
            );
        }
    }
    assert!(
        total_acks > 0,
        "no write was acknowledged in any round (seed {seed})"
    );
}

/// A key's last acknowledged write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ack {
    /// A create or update at `revision` of the value identified by `(run, seq)`.
    Put { revision: u64, run: u64, seq: u64 },
    /// A delete at `revision`.
    Delete { revision: u64 },
}

/// What the store must hold for a key: its last acknowledged write, or (after a check) the
/// state read back then, which is durable from then on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expect {
    /// Never written.
    Nothing,
    /// Present at exactly this mod revision with this value, unless a later write replaced it.
    Put { revision: u64, run: u64, seq: u64 },
    /// Absent, unless created again at a revision after `after`.
    Absent { after: u64 },
}

/// Everything known to be durable.
#[derive(Default)]
struct Model {
    /// Per key (`(writer, key)`), what the store must hold.
    keys: BTreeMap<(usize, usize), Expect>,
    /// The store's current revision seen at the last check.
    revision: u64,
}

/// What one child process did before it was killed.
struct Outcome {
    /// Its run id, if it got as far as `ready`.
    run: Option<u64>,
    /// Its acknowledgements, in the order printed.
    acks: Vec<((usize, usize), Ack)>,
    /// How long it lived.
    lived: Duration,
    /// Whether it compacted, snapshotted and rotated segments aggressively.
    aggressive: bool,
}

impl Outcome {
    /// One line for the test's log.
    fn describe(&self) -> String {
        let ready = if self.run.is_some() {
            ""
        } else {
            " (before ready)"
        };
        let compaction = if self.aggressive {
            ", aggressive compaction"
        } else {
            ""
        };
        format!(
            "killed after {} ms{ready}, {} acks{compaction}",
            self.lived.as_millis(),
            self.acks.len()
        )
    }
}

/// The child process; killed (SIGKILL) and reaped when dropped, so no test failure leaves it
/// behind. It also exits by itself when its stdin, held here, closes.
struct Writer {
    child: Child,
    _stdin: Option<ChildStdin>,
}

impl Drop for Writer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts a writer on `dir`, kills it at a random moment and collects what it acknowledged.
fn run_round(dir: &Path, rng: &mut SmallRng) -> Result<Outcome, String> {
    let aggressive = rng.gen_bool(0.5);
    let spawned = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_setpoint"))
        .args(["debug", "store-writer", "--exit-on-stdin-eof", "--writers"])
        .arg(WRITERS.to_string())
        .args(aggressive.then_some("--aggressive-compaction"))
        .arg("--dir")
        .arg(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("spawning the writer: {e}"))?;
    let stdout = child.stdout.take().ok_or("no stdout pipe")?;
    let stderr = child.stderr.take().ok_or("no stderr pipe")?;
    let stdin = child.stdin.take();
    let mut writer = Writer {
        child,
        _stdin: stdin,
    };
    let (lines_tx, lines) = mpsc::channel();
    let reader = std::thread::spawn(move || read_lines(stdout, &lines_tx));
    let errors = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = BufReader::new(stderr).read_to_string(&mut text);
        text
    });

    // One round in five kills during start-up (recovery included); the others let it write.
    let mut seen = Vec::new();
    if rng.gen_ratio(1, 5) {
        std::thread::sleep(Duration::from_millis(rng.gen_range(0..=50)));
    } else {
        let deadline = spawned + READY_TIMEOUT;
        loop {
            let timeout = deadline.saturating_duration_since(Instant::now());
            match lines.recv_timeout(timeout) {
                Ok(line) => {
                    let ready = line.starts_with("ready ");
                    seen.push(line);
                    if ready {
                        break;
                    }
                }
                Err(_) => break,
            }
        }
        std::thread::sleep(Duration::from_millis(rng.gen_range(20..=300)));
    }

    let exited = writer
        .child
        .try_wait()
        .map_err(|e| format!("polling the writer: {e}"))?;
    let _ = writer.child.kill();
    let _ = writer.child.wait();
    let lived = spawned.elapsed();
    drop(writer);
    let _ = reader.join();
    let stderr = errors.join().unwrap_or_default();
    seen.extend(lines.try_iter());
    if let Some(status) = exited {
        return Err(format!(
            "the writer exited by itself ({status}) before the kill; stderr:\n{stderr}"
        ));
    }
    if !seen.iter().any(|l| l.starts_with("ready ")) && lived > READY_TIMEOUT {
        return Err(format!("the writer never got ready; stderr:\n{stderr}"));
    }
    parse_output(&seen, lived, aggressive)
}

/// Sends each complete line of `stdout` (a line cut short by the kill is dropped).
fn read_lines(stdout: impl Read, lines: &mpsc::Sender<String>) {
    let mut stdout = BufReader::new(stdout);
    loop {
        let mut line = String::new();
        match stdout.read_line(&mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) if !line.ends_with('\n') => return,
            Ok(_) => {
                line.pop();
                if lines.send(line).is_err() {
                    return;
                }
            }
        }
    }
}

/// Reads a writer's `ready` and `ack` lines.
fn parse_output(lines: &[String], lived: Duration, aggressive: bool) -> Result<Outcome, String> {
    let mut outcome = Outcome {
        run: None,
        acks: Vec::new(),
        lived,
        aggressive,
    };
    for line in lines {
        let fields: Vec<&str> = line.split(' ').collect();
        let bad = || format!("unexpected writer output {line:?}");
        match fields[..] {
            ["ready", run, _revision] => {
                outcome.run = Some(
                    run.strip_prefix("run=")
                        .and_then(|r| r.parse().ok())
                        .ok_or_else(bad)?,
                );
            }
            ["ack", op, key, revision, seq] => {
                let run = outcome.run.ok_or_else(bad)?;
                let key = parse_key(key.as_bytes()).ok_or_else(bad)?;
                let revision = revision.parse().map_err(|_| bad())?;
                let ack = match op {
                    "create" | "update" => Ack::Put {
                        revision,
                        run,
                        seq: seq.parse().map_err(|_| bad())?,
                    },
                    "delete" => Ack::Delete { revision },
                    _ => return Err(bad()),
                };
                outcome.acks.push((key, ack));
            }
            _ => return Err(bad()),
        }
    }
    Ok(outcome)
}

/// Reopens the store and checks it against the model updated with `outcome`; then makes the
/// state read back the model for the next round. Returns a one-line summary.
async fn check(dir: &Path, model: &mut Model, outcome: &Outcome) -> Result<String, String> {
    let mut max_acked = 0;
    for &(key, ack) in &outcome.acks {
        let expect = match ack {
            Ack::Put { revision, run, seq } => Expect::Put { revision, run, seq },
            Ack::Delete { revision } => Expect::Absent { after: revision },
        };
        let revision = match ack {
            Ack::Put { revision, .. } | Ack::Delete { revision } => revision,
        };
        max_acked = max_acked.max(revision);
        model.keys.insert(key, expect);
    }

    let store = EmbeddedStore::open(EmbeddedConfig::on_disk(dir))
        .map_err(|e| format!("reopening the store: {e}"))?;
    let result = check_open_store(&store, model, outcome, max_acked).await;
    store.close();
    drop(store);
    result
}

/// The checks proper, on the reopened store.
async fn check_open_store(
    store: &EmbeddedStore,
    model: &mut Model,
    outcome: &Outcome,
    max_acked: u64,
) -> Result<String, String> {
    let current = store
        .current_revision()
        .await
        .map_err(|e| format!("current_revision: {e}"))?
        .get();
    if current < max_acked {
        return Err(format!(
            "current revision {current} is below the acknowledged revision {max_acked}"
        ));
    }
    if current < model.revision {
        return Err(format!(
            "current revision {current} went backwards from {} after the previous restart",
            model.revision
        ));
    }

    let listed = store
        .list(ListRequest::prefix(&b"/crash/"[..]))
        .await
        .map_err(|e| format!("listing /crash/: {e}"))?;
    if listed.more() || listed.revision.get() != current {
        return Err(format!(
            "list of /crash/ is incomplete or at revision {} not {current}",
            listed.revision
        ));
    }
    let mut found = BTreeMap::new();
    for kv in &listed.kvs {
        let key = parse_key(&kv.key)
            .ok_or_else(|| format!("unexpected key {:?}", String::from_utf8_lossy(&kv.key)))?;
        let written = parse_value(&kv.value)
            .map_err(|e| format!("{}: bad value: {e}", String::from_utf8_lossy(&kv.key)))?;
        if (written.writer, written.key) != key {
            return Err(format!(
                "{} holds the value written to /crash/w{}/k{}",
                String::from_utf8_lossy(&kv.key),
                written.writer,
                written.key
            ));
        }
        if kv.mod_revision.get() > current || kv.create_revision > kv.mod_revision {
            return Err(format!(
                "{} has revisions {kv:?} at current revision {current}",
                String::from_utf8_lossy(&kv.key)
            ));
        }
        let got = store.get(&kv.key).await.map_err(|e| format!("get: {e}"))?;
        if got.as_ref() != Some(kv) {
            return Err(format!(
                "get disagrees with list for {}: {got:?}",
                String::from_utf8_lossy(&kv.key)
            ));
        }
        found.insert(key, (kv.clone(), written));
    }
    let counted = store
        .count(b"/crash/")
        .await
        .map_err(|e| format!("count: {e}"))?;
    if counted != listed.kvs.len() as u64 {
        return Err(format!(
            "count says {counted} keys, list {}",
            listed.kvs.len()
        ));
    }

    let mut survived = 0;
    for writer in 0..WRITERS {
        let mut ahead = 0;
        for k in 0..KEYS_PER_WRITER {
            let expect = model
                .keys
                .get(&(writer, k))
                .copied()
                .unwrap_or(Expect::Nothing);
            let state = found.get(&(writer, k));
            let name = format!("/crash/w{writer}/k{k}");
            if !matches_exactly(expect, state, &name)? {
                // An unacknowledged write that was in flight at the kill: from the run just
                // killed, one at most per writer.
                if let Some((_, written)) = state {
                    if Some(written.run) != outcome.run {
                        return Err(format!(
                            "{name} holds a value of run {} (expected {expect:?})",
                            written.run
                        ));
                    }
                }
                ahead += 1;
            }
        }
        if ahead > 1 || (ahead > 0 && outcome.run.is_none()) {
            return Err(format!(
                "writer {writer} has {ahead} keys differing from its acknowledged writes; at most one write may have been in flight"
            ));
        }
        survived += ahead;
    }

    // What was read back is durable: the next round checks against it.
    for writer in 0..WRITERS {
        for k in 0..KEYS_PER_WRITER {
            let expect = match found.get(&(writer, k)) {
                Some((kv, written)) => Expect::Put {
                    revision: kv.mod_revision.get(),
                    run: written.run,
                    seq: written.seq,
                },
                None => Expect::Absent { after: current },
            };
            model.keys.insert((writer, k), expect);
        }
    }
    model.revision = current;
    Ok(format!(
        "revision {current}, {} keys, {} unacknowledged writes survived",
        listed.kvs.len(),
        survived
    ))
}

/// Whether a key's state is exactly what the model expects; an error if it contradicts it in
/// a way no in-flight write explains (an acknowledged write lost or replaced).
fn matches_exactly(
    expect: Expect,
    state: Option<&(KeyValue, Written)>,
    name: &str,
) -> Result<bool, String> {
    match (expect, state) {
        (Expect::Nothing, None) => Ok(true),
        (Expect::Nothing, Some(_)) => Ok(false),
        (Expect::Put { .. }, None) => Ok(false),
        (Expect::Put { revision, run, seq }, Some((kv, written))) => {
            let at = kv.mod_revision.get();
            if at < revision {
                Err(format!("{name} is at mod revision {at}, older than its acknowledged write at {revision}: the write was lost"))
            } else if at == revision && (written.run, written.seq) != (run, seq) {
                Err(format!(
                    "{name} at mod revision {at} holds write (run {}, seq {}), acknowledged was (run {run}, seq {seq})",
                    written.run, written.seq
                ))
            } else {
                Ok(at == revision)
            }
        }
        (Expect::Absent { .. }, None) => Ok(true),
        (Expect::Absent { after }, Some((kv, _))) => {
            if kv.create_revision.get() <= after {
                Err(format!(
                    "{name} was deleted at or before revision {after} but is present, created at {}",
                    kv.create_revision
                ))
            } else {
                Ok(false)
            }
        }
    }
}

/// `(writer, key)` of a key `/crash/w{writer}/k{key}`.
fn parse_key(key: &[u8]) -> Option<(usize, usize)> {
    let key = std::str::from_utf8(key).ok()?;
    let (writer, k) = key.strip_prefix("/crash/w")?.split_once("/k")?;
    let (writer, k): (usize, usize) = (writer.parse().ok()?, k.parse().ok()?);
    (writer < WRITERS && k < KEYS_PER_WRITER).then_some((writer, k))
}

/// What a value says about the write that produced it.
#[derive(Clone, Copy, Debug)]
struct Written {
    run: u64,
    writer: usize,
    key: usize,
    seq: u64,
}

/// Parses and verifies a value: `crash1 run=<run> w=<w> k=<k> seq=<seq> pad=<n> <filler>
/// sum=<fnv1a-64 of the rest, 16 hex digits>`, filler byte `i` being `b'a' + (seq + i) % 26`.
fn parse_value(value: &[u8]) -> Result<Written, String> {
    let text = std::str::from_utf8(value).map_err(|_| "not UTF-8".to_owned())?;
    let (body, sum) = text.rsplit_once(" sum=").ok_or("no checksum")?;
    let sum = u64::from_str_radix(sum, 16).map_err(|_| format!("bad checksum {sum:?}"))?;
    let computed = body.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    if sum != computed {
        return Err(format!(
            "checksum {sum:016x} does not match the content ({computed:016x})"
        ));
    }
    let fields: Vec<&str> = body.splitn(7, ' ').collect();
    let field = |i: usize, name: &str| -> Result<u64, String> {
        fields
            .get(i)
            .and_then(|f| f.strip_prefix(name))
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("bad field {name} in {:?}", &body[..body.len().min(80)]))
    };
    if fields.first() != Some(&"crash1") || fields.len() != 7 {
        return Err(format!("bad header {:?}", &body[..body.len().min(80)]));
    }
    let written = Written {
        run: field(1, "run=")?,
        writer: field(2, "w=")? as usize,
        key: field(3, "k=")? as usize,
        seq: field(4, "seq=")?,
    };
    let pad = field(5, "pad=")?;
    let filler = fields[6].as_bytes();
    let expected = (0..pad).map(|i| b'a' + ((written.seq.wrapping_add(i)) % 26) as u8);
    if filler.len() as u64 != pad || !filler.iter().copied().eq(expected) {
        return Err("bad filler".to_owned());
    }
    Ok(written)
}
