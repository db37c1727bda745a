//! The autoscaling simulation against its targets. The plant is seeded and simulated time is
//! not wall-clock time, so these are deterministic numbers, not timing assertions.

use setpoint_control::sim::{compare, table, Run, Targets};

fn by<'a>(runs: &'a [Run], name: &str) -> &'a Run {
    runs.iter()
        .find(|r| r.controller == name)
        .expect("controller ran")
}

#[test]
fn pid_should_meet_its_targets_against_the_hpa() {
    let seed = 1;
    println!("seed {seed}");
    let results = compare(seed, &Targets::default()).unwrap();
    println!("{}", table(&results));
    let (up, down, small) = (&results[0].1, &results[1].1, &results[2].1);

    let (hpa, pid) = (by(up, "hpa").measures, by(up, "pid").measures);
    assert_eq!(pid.final_replicas, 20.0);
    assert!(pid.overshoot_pct <= 40.0, "{pid:?}");
    assert!(hpa.overshoot_pct > pid.overshoot_pct, "{hpa:?}");
    assert!(pid.backlog_s <= 2.5 * hpa.backlog_s, "{pid:?} vs {hpa:?}");

    let (hpa, pid) = (by(down, "hpa").measures, by(down, "pid").measures);
    assert!(pid.settling_s <= 120.0, "{pid:?}");
    assert!(
        hpa.settling_s >= 300.0,
        "the HPA waits out its 300 s window: {hpa:?}"
    );

    for (s, runs) in &results {
        let pid = by(runs, "pid").measures;
        assert!(pid.direction_changes <= 3, "{}: {pid:?}", s.name);
        assert!(pid.steady_error_pts <= 2.0, "{}: {pid:?}", s.name);
    }
    let pid = by(small, "pid").measures;
    assert!(
        pid.final_replicas > 20.0,
        "the PID acts inside the HPA's band: {pid:?}"
    );
}

#[test]
fn same_seed_should_give_same_results() {
    let a = compare(7, &Targets::default()).unwrap();
    let b = compare(7, &Targets::default()).unwrap();
    assert_eq!(table(&a), table(&b));
}
