//! How long a [`TestEnv`](setpoint_testenv::TestEnv) takes to start: a memory store, the API
//! with every built-in resource's watch cache, the initial namespaces, and a first request
//! answered through the in-process client. Prints the median and worst of 50 starts.
//!
//! ```sh
//! cargo run --release -p setpoint-testenv --example start_time
//! ```

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use kube::api::ListParams;
use setpoint_testenv::TestEnv;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut times: Vec<Duration> = Vec::new();
    for _ in 0..50 {
        let start = Instant::now();
        let env = TestEnv::start().await?;
        let namespaces = env
            .client()
            .api::<Namespace>()
            .list(&ListParams::default())
            .await?;
        times.push(start.elapsed());
        assert_eq!(namespaces.items.len(), 4, "the initial namespaces exist");
    }
    times.sort();
    println!(
        "TestEnv start + first list: median {:?}, worst {:?} (50 starts)",
        times[times.len() / 2],
        times[times.len() - 1]
    );
    Ok(())
}
