//! One step of `setpoint bench scale`: grow the store to the step's size, time a sample of
//! updates and of deletes (re-creating what was deleted), read the server's memory and the
//! store's size, restart the server, read its memory at rest, and time a whole list against
//! a paged one.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context as _, Result};

use super::backend::{disk_usage, Backend};
use super::plan::{spread, Plan};
use super::restart::{restart, Answers};
use super::writes::{self, NAMESPACE};
use crate::bench::api::client::{Call, Client, Protocol};
use crate::bench::api::list;
use crate::bench::api::load::{self, Ran};
use crate::bench::kubeconfig::Endpoint;
use crate::bench::latency::Summary;
use crate::bench::report::count;
use crate::bench::server::ServerProcess;
use crate::bench::usage::{self, Memory};

/// How long the restarted server is left alone before its memory at rest is read.
const SETTLE: Duration = Duration::from_secs(2);

/// A batch of requests: how many, how long they took, their latencies.
#[derive(Clone, Copy, Debug)]
pub(super) struct Timed {
    /// Requests answered.
    pub(super) ops: u64,
    /// From the first request to the last answer.
    pub(super) elapsed: Duration,
    /// Their latencies.
    pub(super) latency: Summary,
}

impl From<Ran> for Timed {
    fn from(ran: Ran) -> Self {
        Timed {
            ops: ran.ops,
            elapsed: ran.elapsed,
            latency: ran.latencies.summary(),
        }
    }
}

/// What one step measured.
pub(super) struct Measured {
    /// Objects stored at the step.
    pub(super) size: u64,
    /// The creates that grew the store to `size`.
    pub(super) creates: Timed,
    /// The sample of updates.
    pub(super) updates: Timed,
    /// The sample of deletes.
    pub(super) deletes: Timed,
    /// The server's memory right after the writes; its peak is over the writes only when
    /// `peak_reset`, else since the server started.
    pub(super) writing: Memory,
    /// Whether the peak could be reset before the writes.
    pub(super) peak_reset: bool,
    /// The JSON of every stored object as created, in bytes.
    pub(super) stored_bytes: u64,
    /// The store's directory on disk, in bytes.
    pub(super) disk_bytes: u64,
    /// From SIGTERM until the old server exited, and whether it had to be killed.
    pub(super) exit: (Duration, bool),
    /// From the restarted server's start until `/readyz` answered 200.
    pub(super) ready: Duration,
    /// From that start until a whole list answered 200 with every object.
    pub(super) first_list: Duration,
    /// The list answers before that.
    pub(super) answers: Answers,
    /// The restarted server's RSS at rest, after its first list and [`SETTLE`].
    pub(super) steady_rss: u64,
    /// One whole list of the namespace.
    pub(super) full_list: Duration,
    /// The same in pages of [`list::PAGE`], and how many pages.
    pub(super) paged_list: (Duration, u64),
}

/// What a step works with: the server (replaced at each restart), how to reach and restart it.
pub(super) struct Bench<'a> {
    /// The benchmark's directory (the server's data directory is `data` below it).
    pub(super) root: &'a Path,
    /// The store under the server.
    pub(super) backend: &'a Backend,
    /// The server's address and credentials (kept across restarts).
    pub(super) endpoint: Endpoint,
    /// Connects to it.
    pub(super) client: Client,
    /// The server's flags after `--data-dir` and `--listen`.
    pub(super) args: Vec<String>,
    /// Concurrent writers.
    pub(super) clients: usize,
    /// Objects stored now, `scale-0..stored`.
    pub(super) stored: u64,
    /// The JSON bytes of those objects as created.
    pub(super) stored_bytes: Arc<AtomicU64>,
}

impl Bench<'_> {
    /// Grows the store to `size` on `server` and measures; returns the results and the
    /// restarted server.
    pub(super) async fn step(
        &mut self,
        server: ServerProcess,
        size: u64,
        plan: &Plan,
    ) -> Result<(Measured, ServerProcess)> {
        let label = count(size);
        let pid = server.pid();
        let peak_reset = match usage::reset_peak(pid) {
            Ok(()) => true,
            Err(error) => {
                eprintln!("[{label}] cannot reset the server's peak RSS ({error:#}); the peak is since it started");
                false
            }
        };

        eprintln!("[{label}] creating {} → {label}", count(self.stored));
        let creates = writes::create(
            &self.client,
            self.clients,
            self.stored,
            size,
            self.stored_bytes.clone(),
        )
        .await?;
        self.stored = size;
        let sample = Arc::new(spread(plan.sample_at(size), size));
        eprintln!(
            "[{label}] {} updates, deletes and re-creates",
            count(sample.len() as u64)
        );
        let updates = writes::update(&self.client, self.clients, sample.clone()).await?;
        let deletes = writes::delete(&self.client, self.clients, sample.clone()).await?;
        writes::recreate(&self.client, self.clients, sample).await?;
        let writing = usage::memory(pid)?;
        let disk_bytes = disk_usage(&self.backend.store_dir(self.root))?;

        eprintln!("[{label}] restarting");
        let args: Vec<&str> = self.args.iter().map(String::as_str).collect();
        let restarted =
            restart(server, self.root, &self.endpoint, &self.client, &args, size).await?;
        tokio::time::sleep(SETTLE).await;
        let steady_rss = usage::rss_bytes(restarted.server.pid())?;

        eprintln!("[{label}] whole and paged lists");
        let (full_list, paged_list) = self.lists(size).await?;
        let measured = Measured {
            size,
            creates: creates.into(),
            updates: updates.into(),
            deletes: deletes.into(),
            writing,
            peak_reset,
            stored_bytes: self.stored_bytes.load(Ordering::Relaxed),
            disk_bytes,
            exit: (restarted.exit, restarted.killed),
            ready: restarted.ready,
            first_list: restarted.first_list,
            answers: restarted.answers,
            steady_rss,
            full_list,
            paged_list,
        };
        Ok((measured, restarted.server))
    }

    /// Times one whole list of the namespace and one in pages, each checked to hold `size`
    /// objects (the JSON decoded as a client would, the objects skipped).
    async fn lists(&self, size: u64) -> Result<(Duration, (Duration, u64))> {
        let path = load::configmaps(NAMESPACE);
        let mut connection = self.client.connect(Protocol::Http1).await?;
        let start = Instant::now();
        let body = connection.call(Call::get(path.clone())).await?;
        let items = list::parse(&body)?.items.len() as u64;
        let full = start.elapsed();
        ensure!(
            items == size,
            "the whole list held {items} of {size} objects"
        );
        drop(body);

        let start = Instant::now();
        let (items, pages) = list::list_paged(&mut connection, &path, size)
            .await
            .context("listing in pages")?;
        let paged = start.elapsed();
        ensure!(items == size, "the pages held {items} of {size} objects");
        Ok((full, (paged, pages)))
    }
}
