//! Prints one run's trace at sync times: `trace SCENARIO_INDEX hpa|pid [kp ki kd db hy freeze predict fresh]`.
use setpoint_control::sim::*;
use setpoint_control::*;
fn main() {
    let a: Vec<String> = std::env::args().collect();
    let which: usize = a.get(1).map(|s| s.parse().unwrap()).unwrap_or(0);
    let ctl = a.get(2).cloned().unwrap_or("pid".into());
    let seed: u64 = std::env::var("SEED").ok().map(|s| s.parse().unwrap()).unwrap_or(1);
    let t = Targets::default();
    let s = &scenarios(seed)[which];
    let f = |i: usize, d: f64| a.get(i).map(|s| s.parse::<f64>().unwrap()).unwrap_or(d);
    let r = if ctl == "pid" {
        let mut cfg = PidAutoscalerConfig::cpu(2, 100, 50);
        cfg.kp = f(3, cfg.kp); cfg.ki = f(4, cfg.ki); cfg.kd = f(5, cfg.kd); cfg.deadband = f(6, cfg.deadband);
        cfg.rounding = Rounding::Nearest { hysteresis: f(7, 0.1) };
        cfg.freeze_while_starting = f(8, 1.0) > 0.5; cfg.predict_pending = f(9, 1.0) > 0.5; cfg.fresh_metrics_only = f(10, 1.0) > 0.5;
        run(s, &t, &mut PidAutoscaler::new(cfg).unwrap()).unwrap()
    } else { run(s, &t, &mut default_hpa(&t).unwrap()).unwrap() };
    if std::env::var("QUIET").is_err() {
    for p in r.trace.iter().filter(|p| (p.t as i64) % 15 == 5 && p.t > 290.0 && p.t < 1100.0) {
        println!("{:5} rep {:3} ready {:3} util {:5.1} backlog {:8.0} arr {:6.1}", p.t, p.replicas, p.ready, p.utilization*100.0, p.backlog, p.arrivals);
    }}
    println!("{:?}", r.measures);
}
