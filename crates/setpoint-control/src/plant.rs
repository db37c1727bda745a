//! A deterministic plant for autoscaling experiments: a service whose pods start late, a queue
//! in front of them, and a metrics pipeline like metrics-server's.
//!
//! Model, advanced in fixed ticks (1 s by default):
//! - **Load**: requests arrive at `base × step factor × noise`; steps change the factor at
//!   given times; noise is log-normal with relative standard deviation `noise`, correlated over
//!   `noise_correlation` (an AR(1) process) and drawn from [`SplitMix64`] seeded with `seed` —
//!   the same configuration and seed give the same trace, bit for bit.
//! - **Pods**: each serves up to `pod_capacity` requests/s at 100 % of its CPU request.
//!   A pod created at `t` is Running at once and Ready at `t + start_delay`; until then it gets
//!   no traffic and uses no CPU. Scaling down removes unready pods first, newest first, then
//!   the newest ready ones, as the ReplicaSet controller ranks them; removal is immediate.
//! - **Queue**: work that ready pods cannot serve waits in a backlog (unbounded, FIFO); ready
//!   pods serve `min(arrivals + backlog, capacity)` each tick, shared equally, so utilisation
//!   saturates at 100 % of the request while a backlog remains.
//! - **Metrics**: every `scrape_interval` (15 s) the pipeline publishes, for each pod that has
//!   run a full `metric_window` (30 s), its CPU usage averaged over that window, stamped with
//!   the scrape time. Recommenders see only the latest scrape, restricted to live pods.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use serde::Serialize;

use crate::error::{ConfigError, Result};
use crate::observe::{
    ConditionStatus, Observation, PodInfo, PodMetric, PodMetrics, PodPhase, ReadyCondition,
};
use crate::rng::SplitMix64;

/// A change of the load's factor at a time.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LoadStep {
    /// When the factor changes.
    pub at: Duration,
    /// The new factor (multiplies `base_load`).
    pub factor: f64,
}

/// The plant's parameters.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlantConfig {
    /// Simulation step (1 s).
    pub tick: Duration,
    /// Requests/s one pod serves at 100 % of its CPU request.
    pub pod_capacity: f64,
    /// CPU request per pod, millicores.
    pub cpu_request_milli: i64,
    /// From pod creation to Ready.
    pub start_delay: Duration,
    /// How often metrics are published.
    pub scrape_interval: Duration,
    /// The window each published sample averages over.
    pub metric_window: Duration,
    /// Requests/s before any step.
    pub base_load: f64,
    /// Load steps, in time order.
    pub steps: Vec<LoadStep>,
    /// Relative standard deviation of the arrival rate (0 = none).
    pub noise: f64,
    /// Correlation time of the noise.
    pub noise_correlation: Duration,
    /// Pods at time 0 (created and ready at 0).
    pub initial_replicas: i32,
    /// PRNG seed.
    pub seed: u64,
}

impl Default for PlantConfig {
    fn default() -> Self {
        PlantConfig {
            tick: Duration::from_secs(1),
            pod_capacity: 10.0,
            cpu_request_milli: 1000,
            start_delay: Duration::from_secs(45),
            scrape_interval: Duration::from_secs(15),
            metric_window: Duration::from_secs(30),
            base_load: 100.0,
            steps: Vec::new(),
            noise: 0.02,
            noise_correlation: Duration::from_secs(20),
            initial_replicas: 20,
            seed: 1,
        }
    }
}

/// One tick of the plant's state, for metrics and plots.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TracePoint {
    /// Seconds since the start.
    pub t: f64,
    /// Arrival rate this tick, requests/s.
    pub arrivals: f64,
    /// Pods asked for (spec replicas).
    pub replicas: i32,
    /// Ready pods.
    pub ready: i32,
    /// True CPU utilisation of the ready pods, 0..=1 of the request.
    pub utilization: f64,
    /// Requests waiting at the end of the tick.
    pub backlog: f64,
}

#[derive(Debug, Clone)]
struct SimPod {
    id: u64,
    created: Duration,
    ready_at: Duration,
    /// Utilisation per tick, newest last, at most one window long.
    samples: VecDeque<f64>,
}

/// The plant. Advance it with [`Plant::step`]; scale it with [`Plant::set_replicas`].
#[derive(Debug, Clone)]
pub struct Plant {
    cfg: PlantConfig,
    now: Duration,
    rng: SplitMix64,
    /// The AR(1) noise state, unit variance.
    noise_state: f64,
    pods: Vec<SimPod>,
    next_id: u64,
    backlog: f64,
    window_ticks: usize,
    /// The latest published metrics.
    scrape: PodMetrics,
    trace: Vec<TracePoint>,
}

impl Plant {
    /// A plant at time 0 with `initial_replicas` ready pods and an empty queue.
    pub fn new(cfg: PlantConfig) -> Result<Self> {
        let positive = [
            ("tick", cfg.tick),
            ("scrape_interval", cfg.scrape_interval),
            ("metric_window", cfg.metric_window),
        ];
        if let Some((name, _)) = positive.iter().find(|(_, d)| d.is_zero()) {
            return Err(ConfigError::Invalid(format!("{name} must be > 0")));
        }
        let positive = cfg.pod_capacity.is_finite() && cfg.pod_capacity > 0.0;
        let non_negative = |v: f64| v.is_finite() && v >= 0.0;
        if !positive || !non_negative(cfg.base_load) || !non_negative(cfg.noise) {
            return Err(ConfigError::Invalid(
                "pod_capacity must be > 0, base_load and noise >= 0".into(),
            ));
        }
        if cfg.initial_replicas < 0 || cfg.cpu_request_milli <= 0 {
            return Err(ConfigError::Invalid(
                "initial_replicas must be >= 0 and cpu_request_milli > 0".into(),
            ));
        }
        let window_ticks = (cfg.metric_window.as_secs_f64() / cfg.tick.as_secs_f64())
            .round()
            .max(1.0) as usize;
        let mut plant = Plant {
            rng: SplitMix64::new(cfg.seed),
            now: Duration::ZERO,
            noise_state: 0.0,
            pods: Vec::new(),
            next_id: 0,
            backlog: 0.0,
            window_ticks,
            scrape: PodMetrics::new(),
            trace: Vec::new(),
            cfg,
        };
        plant.noise_state = plant.rng.next_gaussian();
        for _ in 0..plant.cfg.initial_replicas {
            plant.add_pod(Duration::ZERO);
        }
        Ok(plant)
    }

    fn add_pod(&mut self, ready_at: Duration) {
        self.pods.push(SimPod {
            id: self.next_id,
            created: self.now,
            ready_at,
            samples: VecDeque::new(),
        });
        self.next_id += 1;
    }

    /// The configuration.
    pub fn config(&self) -> &PlantConfig {
        &self.cfg
    }

    /// Time since the start.
    pub fn now(&self) -> Duration {
        self.now
    }

    /// Pods asked for.
    pub fn replicas(&self) -> i32 {
        i32::try_from(self.pods.len()).unwrap_or(i32::MAX)
    }

    /// Ready pods now.
    pub fn ready(&self) -> i32 {
        let n = self.pods.iter().filter(|p| p.ready_at <= self.now).count();
        i32::try_from(n).unwrap_or(i32::MAX)
    }

    /// Every tick so far.
    pub fn trace(&self) -> &[TracePoint] {
        &self.trace
    }

    /// Scales to `replicas` (negative counts as 0): new pods start now; removal takes unready
    /// pods first, newest first, then the newest ready ones.
    pub fn set_replicas(&mut self, replicas: i32) {
        let want = usize::try_from(replicas.max(0)).unwrap_or(0);
        while self.pods.len() < want {
            self.add_pod(self.now + self.cfg.start_delay);
        }
        if self.pods.len() > want {
            let now = self.now;
            // Keep the best `want`: ready before unready, older before newer.
            self.pods
                .sort_by_key(|p| (p.ready_at > now, p.created, p.id));
            self.pods.truncate(want);
        }
    }

    fn load_factor(&self) -> f64 {
        self.cfg
            .steps
            .iter()
            .rev()
            .find(|s| s.at <= self.now)
            .map_or(1.0, |s| s.factor)
    }

    /// Advances one tick.
    pub fn step(&mut self) {
        let dt = self.cfg.tick.as_secs_f64();
        self.now += self.cfg.tick;
        let a = (-dt / self.cfg.noise_correlation.as_secs_f64().max(dt)).exp();
        self.noise_state = a * self.noise_state + (1.0 - a * a).sqrt() * self.rng.next_gaussian();
        let sigma = self.cfg.noise;
        let noise = (sigma * self.noise_state - sigma * sigma / 2.0).exp();
        let arrivals = self.cfg.base_load * self.load_factor() * noise;
        let now = self.now;
        let ready = self.pods.iter().filter(|p| p.ready_at <= now).count();
        let capacity = ready as f64 * self.cfg.pod_capacity * dt;
        let work = arrivals * dt + self.backlog;
        let served = work.min(capacity);
        self.backlog = work - served;
        let utilization = if capacity > 0.0 {
            served / capacity
        } else {
            0.0
        };
        let window = self.window_ticks;
        for p in &mut self.pods {
            p.samples
                .push_back(if p.ready_at <= now { utilization } else { 0.0 });
            if p.samples.len() > window {
                p.samples.pop_front();
            }
        }
        let interval = self.cfg.scrape_interval.as_millis();
        if interval > 0 && self.now.as_millis().is_multiple_of(interval) {
            self.scrape();
        }
        self.trace.push(TracePoint {
            t: self.now.as_secs_f64(),
            arrivals,
            replicas: self.replicas(),
            ready: i32::try_from(ready).unwrap_or(i32::MAX),
            utilization,
            backlog: self.backlog,
        });
    }

    fn scrape(&mut self) {
        let request = self.cfg.cpu_request_milli as f64;
        self.scrape = self
            .pods
            .iter()
            .filter(|p| p.samples.len() >= self.window_ticks)
            .map(|p| {
                let mean = p.samples.iter().sum::<f64>() / p.samples.len() as f64;
                (
                    pod_name(p.id),
                    PodMetric {
                        value_milli: (mean * request).round() as i64,
                        timestamp: self.now,
                        window: self.cfg.metric_window,
                    },
                )
            })
            .collect();
    }

    /// What an autoscaler sees now: spec replicas, the pods and the latest metrics.
    pub fn observe(&self) -> Observation {
        let pods: Vec<PodInfo> = self
            .pods
            .iter()
            .map(|p| {
                let ready = p.ready_at <= self.now;
                PodInfo {
                    name: pod_name(p.id),
                    phase: PodPhase::Running,
                    deleting: false,
                    start_time: Some(p.created),
                    ready: Some(ReadyCondition {
                        status: if ready {
                            ConditionStatus::True
                        } else {
                            ConditionStatus::False
                        },
                        last_transition: if ready { p.ready_at } else { p.created },
                    }),
                    requests: BTreeMap::from([("cpu".to_string(), self.cfg.cpu_request_milli)]),
                }
            })
            .collect();
        let cpu = self
            .scrape
            .iter()
            .filter(|(name, _)| pods.iter().any(|p| &p.name == *name))
            .map(|(n, m)| (n.clone(), *m))
            .collect();
        Observation {
            spec_replicas: self.replicas(),
            status_replicas: i32::try_from(pods.len()).unwrap_or(i32::MAX),
            pods,
            metrics: BTreeMap::from([("cpu".to_string(), cpu)]),
            values: BTreeMap::new(),
        }
    }
}

fn pod_name(id: u64) -> String {
    format!("pod-{id}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(seed: u64) -> PlantConfig {
        PlantConfig {
            seed,
            noise: 0.05,
            steps: vec![LoadStep {
                at: Duration::from_secs(60),
                factor: 2.0,
            }],
            ..PlantConfig::default()
        }
    }

    fn run(seed: u64) -> Vec<TracePoint> {
        let mut p = Plant::new(cfg(seed)).unwrap();
        for k in 0..300 {
            if k == 100 {
                p.set_replicas(30);
            }
            p.step();
        }
        p.trace().to_vec()
    }

    #[test]
    fn same_seed_should_give_same_trace() {
        assert_eq!(run(42), run(42));
        assert_ne!(run(42), run(43));
    }

    #[test]
    fn pods_should_be_ready_after_the_start_delay_and_serve_then() {
        let mut p = Plant::new(PlantConfig {
            noise: 0.0,
            ..PlantConfig::default()
        })
        .unwrap();
        p.step();
        p.set_replicas(25);
        for _ in 0..44 {
            p.step();
        }
        assert_eq!((p.replicas(), p.ready()), (25, 20));
        p.step();
        assert_eq!(p.ready(), 25);
        let last = p.trace().last().unwrap();
        assert!((last.utilization - 0.4).abs() < 1e-9, "{last:?}");
    }

    #[test]
    fn overload_should_saturate_utilization_and_grow_a_backlog() {
        let mut p = Plant::new(PlantConfig {
            noise: 0.0,
            base_load: 300.0,
            ..PlantConfig::default()
        })
        .unwrap();
        for _ in 0..10 {
            p.step();
        }
        let last = p.trace().last().unwrap();
        assert_eq!(last.utilization, 1.0);
        assert!((last.backlog - 1000.0).abs() < 1e-6, "{last:?}");
    }

    #[test]
    fn metrics_should_average_a_full_window_at_scrape_times() {
        let mut p = Plant::new(PlantConfig {
            noise: 0.0,
            ..PlantConfig::default()
        })
        .unwrap();
        for _ in 0..14 {
            p.step();
        }
        assert!(p.observe().metrics["cpu"].is_empty(), "no full window yet");
        for _ in 0..16 {
            p.step();
        }
        let o = p.observe();
        let m = &o.metrics["cpu"];
        assert_eq!(m.len(), 20);
        let s = m.values().next().unwrap();
        assert_eq!((s.value_milli, s.timestamp), (500, Duration::from_secs(30)));
        // A new pod has no metric until it has run a full window.
        p.set_replicas(21);
        for _ in 0..15 {
            p.step();
        }
        assert_eq!(p.observe().metrics["cpu"].len(), 20);
    }

    #[test]
    fn scale_down_should_remove_unready_then_newest() {
        let mut p = Plant::new(PlantConfig {
            initial_replicas: 2,
            ..PlantConfig::default()
        })
        .unwrap();
        p.step();
        p.set_replicas(4);
        p.set_replicas(3);
        assert_eq!((p.replicas(), p.ready()), (3, 2));
        p.set_replicas(1);
        assert_eq!((p.replicas(), p.ready()), (1, 1));
        assert_eq!(p.observe().pods[0].name, "pod-0");
    }
}
