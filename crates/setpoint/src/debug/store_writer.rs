//! `setpoint debug store-writer`: the victim of the store crash test. Opens an embedded store on
//! disk and writes to it forever from N concurrent writers, printing one line per acknowledged
//! write, so that whoever kills it knows exactly which writes the store promised to keep.
//!
//! Writer `w` owns the keys `/crash/w{w}/k0` to `k7` and cycles through them: creates a key that
//! is absent, otherwise updates it conditionally on the mod revision it last saw, and now and
//! then deletes it (to re-create it on a later pass). Each writer waits for one write's
//! acknowledgement before its next, so at most one write per writer is in flight.
//!
//! Standard output, one line each, flushed as written:
//! - `ready run=<run> revision=<revision>` once the store is open and every key's state read;
//! - `ack create|update <key> <mod revision> <seq>` after a create or update is acknowledged,
//!   where the value written is [`crash_value::encode`] of `(run, writer, key, seq)`;
//! - `ack delete <key> <revision> -` after a delete is acknowledged.
//!
//! With `--aggressive-compaction` the store keeps 1,000 revisions of history, compacts every
//! 20 ms and uses 256 KiB log segments, so that snapshots, segment rotation and removal happen
//! within the short life the crash test gives it.
//!
//! Any store error ends the process with a non-zero status: with one owner per key none is
//! expected.

use std::io::Write;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use bytes::Bytes;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use setpoint_store::{EmbeddedConfig, EmbeddedStore, Revision, Store};

use super::crash_value::{self, WriteId};
use crate::cli::StoreWriterArgs;

/// Keys per writer.
const KEYS_PER_WRITER: usize = 8;
/// One write in this many, to a present key, is a delete.
const DELETE_ONE_IN: u32 = 10;

/// Runs `setpoint debug store-writer` until killed (or until stdin ends, if asked).
pub(crate) async fn store_writer(args: StoreWriterArgs) -> Result<()> {
    if args.exit_on_stdin_eof {
        exit_on_stdin_eof();
    }
    let run = u64::try_from(SystemTime::now().duration_since(UNIX_EPOCH)?.as_nanos())?;
    let mut config = EmbeddedConfig::on_disk(&args.dir);
    if args.aggressive_compaction {
        config.history_revisions = 1_000;
        config.history_min_revisions = 100;
        config.compaction_interval = Some(Duration::from_millis(20));
        config.segment_bytes = 256 << 10;
    }
    let store = tokio::task::spawn_blocking(move || EmbeddedStore::open(config))
        .await?
        .with_context(|| format!("opening the store in {}", args.dir.display()))?;

    let mut writers = Vec::with_capacity(args.writers);
    for writer in 0..args.writers {
        writers.push(Writer::load(&store, run, writer).await?);
    }
    let revision = store.current_revision().await?;
    print_line(&format!("ready run={run} revision={revision}"))?;

    let tasks: Vec<_> = writers
        .into_iter()
        .map(|writer| tokio::spawn(writer.run()))
        .collect();
    for task in tasks {
        task.await??;
    }
    Ok(())
}

/// One writer task and the keys it owns.
struct Writer {
    /// The store, shared with the other writers.
    store: EmbeddedStore,
    /// The identity of this writer's next write; `id.key` is the next key to write.
    id: WriteId,
    /// Each owned key and its mod revision as this writer last saw it, `None` when absent.
    /// Nobody else writes these keys, so the revision is the current one.
    keys: Vec<(Bytes, Option<Revision>)>,
    /// Decides when to delete; seeded from the run and writer.
    rng: SmallRng,
}

impl Writer {
    /// Reads the current state of writer `writer`'s keys.
    async fn load(store: &EmbeddedStore, run: u64, writer: usize) -> Result<Self> {
        let mut keys = Vec::with_capacity(KEYS_PER_WRITER);
        for k in 0..KEYS_PER_WRITER {
            let key = Bytes::from(format!("/crash/w{writer}/k{k}"));
            let revision = store.get(&key).await?.map(|kv| kv.mod_revision);
            keys.push((key, revision));
        }
        Ok(Writer {
            store: store.clone(),
            id: WriteId {
                run,
                writer,
                key: 0,
                seq: 0,
            },
            keys,
            rng: SmallRng::seed_from_u64(run ^ writer as u64),
        })
    }

    /// Writes forever, printing an `ack` line after each acknowledged write.
    async fn run(mut self) -> Result<()> {
        loop {
            self.write_next().await?;
            self.id.seq += 1;
            self.id.key = (self.id.key + 1) % KEYS_PER_WRITER;
        }
    }

    /// Creates, updates or deletes the next key, and prints its acknowledgement.
    async fn write_next(&mut self) -> Result<()> {
        let (key, current) = self.keys[self.id.key].clone();
        let shown = String::from_utf8_lossy(&key).into_owned();
        let value = Bytes::from(crash_value::encode(self.id));
        let (line, now) = match current {
            None => {
                let kv = self
                    .store
                    .create(key, value)
                    .await
                    .with_context(|| format!("creating {shown}"))?;
                let line = format!("ack create {shown} {} {}", kv.mod_revision, self.id.seq);
                (line, Some(kv.mod_revision))
            }
            Some(expected) if self.rng.gen_ratio(1, DELETE_ONE_IN) => {
                let event = self
                    .store
                    .delete(key, Some(expected))
                    .await
                    .with_context(|| format!("deleting {shown} at {expected}"))?;
                (format!("ack delete {shown} {} -", event.revision()), None)
            }
            Some(expected) => {
                let kv = self
                    .store
                    .update(key, value, Some(expected))
                    .await
                    .with_context(|| format!("updating {shown} at {expected}"))?;
                let line = format!("ack update {shown} {} {}", kv.mod_revision, self.id.seq);
                (line, Some(kv.mod_revision))
            }
        };
        self.keys[self.id.key].1 = now;
        print_line(&line)
    }
}

/// Writes one line to standard output in a single write and flushes it, under the stdout lock
/// so lines from concurrent writers never interleave. Fails when nobody reads any more.
fn print_line(line: &str) -> Result<()> {
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(format!("{line}\n").as_bytes())?;
    stdout.flush()?;
    Ok(())
}

/// Exits the process as soon as standard input ends: the parent holding its other end died.
fn exit_on_stdin_eof() {
    std::thread::spawn(|| {
        let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
        std::process::exit(0);
    });
}
