//! A discrete PID controller in velocity (incremental) form: each sample computes a change
//! `Δu` and adds it to the output actually in force.
//!
//! Because the state is the output itself, the form has no integral to wind up (clamping the
//! output is the whole anti-windup), and an output changed from outside
//! ([`VelocityPid::set_output`]) is simply continued from — transfer is bumpless by
//! construction. Gains are continuous-time and folded with the sample time as in
//! [`crate::Pid`]; the derivative acts on the measurement; errors within the deadband count as
//! zero.

use crate::error::Result;
use crate::pid::PidConfig;

/// A velocity-form PID. Call [`VelocityPid::update`] once per sample period.
#[derive(Debug, Clone)]
pub struct VelocityPid {
    cfg: PidConfig,
    /// The output in force; within the output limits.
    output: f64,
    /// Error of the previous sample (after the deadband); `None` before the first.
    last_error: Option<f64>,
    /// The two previous measurements, newest first.
    last_measurements: [Option<f64>; 2],
}

impl VelocityPid {
    /// A controller whose output starts at `initial_output` (clamped).
    pub fn new(cfg: PidConfig, initial_output: f64) -> Result<Self> {
        cfg.validate()?;
        let output = initial_output.clamp(cfg.output_min, cfg.output_max);
        Ok(VelocityPid {
            cfg,
            output,
            last_error: None,
            last_measurements: [None, None],
        })
    }

    /// The output in force.
    pub fn output(&self) -> f64 {
        self.output
    }

    /// Records an output set from outside; the next increment starts from it.
    pub fn set_output(&mut self, output: f64) {
        self.output = output.clamp(self.cfg.output_min, self.cfg.output_max);
    }

    /// One sample: returns the new output.
    pub fn update(&mut self, setpoint: f64, measurement: f64) -> f64 {
        let s = match self.cfg.action {
            crate::Action::Direct => 1.0,
            crate::Action::Reverse => -1.0,
        };
        let t = self.cfg.sample_time;
        let raw = setpoint - measurement;
        let error = if raw.abs() <= self.cfg.deadband {
            0.0
        } else {
            raw
        };
        let de = error - self.last_error.unwrap_or(error);
        let d2y = match self.last_measurements {
            [Some(y1), Some(y2)] => measurement - 2.0 * y1 + y2,
            [Some(y1), None] => measurement - y1,
            _ => 0.0,
        };
        let delta = s * (self.cfg.kp * de + self.cfg.ki * t * error - self.cfg.kd / t * d2y);
        self.output = (self.output + delta).clamp(self.cfg.output_min, self.cfg.output_max);
        self.last_error = Some(error);
        self.last_measurements = [Some(measurement), self.last_measurements[0]];
        self.output
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn velocity_form_should_match_positional_form_when_unsaturated() {
        let cfg = PidConfig::new(0.7, 0.3, 0.0, 0.5);
        let mut pos = crate::Pid::new(cfg.clone()).unwrap();
        let mut vel = VelocityPid::new(cfg, 0.0).unwrap();
        // Start both from the same first sample (positional P appears at once; velocity's
        // first increment has no previous error, so seed it with the same first sample).
        let ys = [0.0, 0.2, 0.5, 0.9, 1.2, 1.1, 1.0, 0.95];
        let first_pos = pos.update(1.0, ys[0]);
        vel.set_output(first_pos);
        vel.update(1.0, ys[0]);
        vel.set_output(first_pos);
        for &y in &ys[1..] {
            let a = pos.update(1.0, y);
            let b = vel.update(1.0, y);
            assert!((a - b).abs() < 1e-9, "{a} vs {b}");
        }
    }

    #[test]
    fn velocity_form_should_leave_saturation_at_once() {
        let mut cfg = PidConfig::new(0.0, 1.0, 0.0, 1.0);
        cfg.output_max = 10.0;
        let mut vel = VelocityPid::new(cfg, 0.0).unwrap();
        for _ in 0..1000 {
            vel.update(100.0, 0.0);
        }
        assert_eq!(vel.output(), 10.0);
        assert!(vel.update(0.0, 1.0) < 10.0);
    }

    #[test]
    fn velocity_form_should_continue_from_an_external_output() {
        let mut vel = VelocityPid::new(PidConfig::new(1.0, 1.0, 0.0, 1.0), 0.0).unwrap();
        vel.update(1.0, 1.0);
        vel.set_output(42.0);
        assert_eq!(
            vel.update(1.0, 1.0),
            42.0,
            "zero error: no increment, no bump"
        );
    }

    #[test]
    fn velocity_form_should_not_kick_on_setpoint_change() {
        let mut vel = VelocityPid::new(PidConfig::new(0.0, 0.0, 5.0, 1.0), 0.0).unwrap();
        vel.update(0.0, 0.0);
        vel.update(0.0, 0.0);
        assert_eq!(vel.update(10.0, 0.0), 0.0);
    }
}
