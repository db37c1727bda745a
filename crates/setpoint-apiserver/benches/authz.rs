//! RBAC decision latency with many RoleBindings: `cargo bench -p setpoint-apiserver --bench
//! authz [-- BINDINGS DECISIONS]` prints p50, p99 and max per decision (target: p99 ≤ 5 µs with
//! 1,000 RoleBindings, release build).

fn main() {
    let mut args = std::env::args().skip(1).filter(|a| !a.starts_with('-'));
    let bindings = args.next().and_then(|a| a.parse().ok()).unwrap_or(1000);
    let decisions = args.next().and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let mut latencies = setpoint_apiserver::authz_decision_latencies(bindings, decisions);
    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() as f64 - 1.0) * q) as usize];
    println!(
        "rbac decisions: {bindings} RoleBindings, {decisions} decisions: p50 {:?}, p99 {:?}, max {:?}",
        at(0.5),
        at(0.99),
        at(1.0)
    );
}
