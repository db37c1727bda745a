//! Micro-benchmark: add/next/done cycles per second for 10,000 distinct keys, with one and
//! two worker tasks. Run with `cargo run --release -p setpoint-runtime --example queue_bench`.

use std::time::{Duration, Instant};

use setpoint_runtime::WorkQueue;

const KEYS: u64 = 10_000;
const ROUNDS: u32 = 50;

/// Each round, adds every key to a fresh queue, shuts it down and drains it with `workers`
/// tasks; returns the time per add/next/done cycle.
async fn run(workers: usize) -> Duration {
    let start = Instant::now();
    for _ in 0..ROUNDS {
        let q = WorkQueue::<u64>::new();
        let adder = {
            let q = q.enqueuer();
            tokio::spawn(async move {
                for k in 0..KEYS {
                    q.add(k);
                }
            })
        };
        adder.await.expect("adder");
        q.shut_down();
        let mut tasks = Vec::new();
        for _ in 0..workers {
            let q = q.clone();
            tasks.push(tokio::spawn(async move {
                let mut n = 0u64;
                while let Some(claim) = q.next().await {
                    claim.done();
                    n += 1;
                }
                n
            }));
        }
        let mut total = 0;
        for t in tasks {
            total += t.await.expect("worker");
        }
        assert_eq!(total, KEYS);
    }
    start.elapsed() / (ROUNDS * KEYS as u32)
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .expect("runtime");
    rt.block_on(async {
        run(1).await; // warm up
        for workers in [1, 2] {
            let per_cycle = run(workers).await;
            println!(
                "{workers} worker(s): {:.3} µs per add/next/done cycle, {:.2} M cycles/s ({KEYS} keys × {ROUNDS} rounds)",
                per_cycle.as_secs_f64() * 1e6,
                1.0 / per_cycle.as_secs_f64() / 1e6,
            );
        }
    });
}
