//! A discrete PID controller in positional form, for loops sampled at a fixed period.
//!
//! What it promises, each property pinned by a test below:
//! - **Sample time folded into the gains**: `ki` is per second and `kd` in seconds; the
//!   controller multiplies them by the sample time once, so changing the sample time does not
//!   change the loop's behaviour in continuous time.
//! - **Derivative on the measurement**, not on the error: a set-point change gives no kick.
//!   An optional first-order low-pass (time constant `derivative_filter`) smooths it.
//! - **Integral kept with its gain inside** (`I += ki·T·e`), so retuning `ki` is bumpless.
//! - **Anti-windup**: the integral is clamped to its own limits and the output to its limits.
//! - **Bumpless manual → auto transfer**: switching to auto starts from the last output.
//! - **Direct or reverse action**: reverse makes the output rise when the measurement does.
//! - **Deadband**: an error whose magnitude is at most `deadband` counts as zero (P and I).
//!
//! The incremental (velocity) form lives in [`mod@crate::velocity`].

use serde::{Deserialize, Serialize};

use crate::error::{ConfigError, Result};

/// Whether the output moves with the error or against the measurement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum Action {
    /// Output rises when the measurement is below the set-point (a heater).
    #[default]
    Direct,
    /// Output rises when the measurement is above the set-point (a cooler, an autoscaler).
    Reverse,
}

impl Action {
    fn sign(self) -> f64 {
        match self {
            Action::Direct => 1.0,
            Action::Reverse => -1.0,
        }
    }
}

/// Tuning and limits of a [`Pid`]. Gains are in continuous-time units.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PidConfig {
    /// Proportional gain (output units per error unit).
    pub kp: f64,
    /// Integral gain per second.
    pub ki: f64,
    /// Derivative gain in seconds.
    pub kd: f64,
    /// The fixed sample period in seconds (> 0).
    pub sample_time: f64,
    /// Time constant of the derivative's first-order low-pass in seconds; 0 for none.
    pub derivative_filter: f64,
    /// Lowest output.
    pub output_min: f64,
    /// Highest output.
    pub output_max: f64,
    /// Errors with magnitude at most this count as zero for P and I.
    pub deadband: f64,
    /// Direct or reverse action.
    pub action: Action,
}

impl PidConfig {
    /// A config with the given gains and sample time, unbounded output, no filter, no deadband.
    pub fn new(kp: f64, ki: f64, kd: f64, sample_time: f64) -> Self {
        PidConfig {
            kp,
            ki,
            kd,
            sample_time,
            derivative_filter: 0.0,
            output_min: f64::NEG_INFINITY,
            output_max: f64::INFINITY,
            deadband: 0.0,
            action: Action::Direct,
        }
    }

    /// Checks every field; the error names the first bad one.
    pub fn validate(&self) -> Result<()> {
        let finite = [
            ("kp", self.kp),
            ("ki", self.ki),
            ("kd", self.kd),
            ("sample_time", self.sample_time),
            ("derivative_filter", self.derivative_filter),
            ("deadband", self.deadband),
        ];
        for (name, v) in finite {
            if !v.is_finite() || v < 0.0 {
                return Err(ConfigError::Invalid(format!(
                    "{name} must be finite and >= 0, got {v}"
                )));
            }
        }
        if self.sample_time <= 0.0 {
            return Err(ConfigError::Invalid("sample_time must be > 0".into()));
        }
        if self.output_min.is_nan() || self.output_max.is_nan() || self.output_min > self.output_max
        {
            return Err(ConfigError::Invalid(format!(
                "output limits [{}, {}] are not an interval",
                self.output_min, self.output_max
            )));
        }
        Ok(())
    }
}

/// Whether the loop is closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Mode {
    /// The output is set from outside; the controller only tracks the measurement.
    Manual,
    /// The controller computes the output.
    Automatic,
}

/// Which way the integral may move this sample (the autoscaler freezes upward integration
/// while new pods are starting).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IntegralGate {
    /// Integrate normally.
    #[default]
    Open,
    /// Do not let the integral's contribution to the output rise.
    NoIncrease,
    /// Do not integrate at all.
    Frozen,
}

/// The three terms and their sum, as of the last sample, for status and plots.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct PidTerms {
    /// Proportional term.
    pub p: f64,
    /// Integral term (already multiplied by its gain).
    pub i: f64,
    /// Derivative term (filtered).
    pub d: f64,
    /// `p + i + d`, clamped to the output limits (in auto); the manual output in manual.
    pub output: f64,
}

/// A positional PID controller. Call [`Pid::update`] once per sample period.
#[derive(Debug, Clone)]
pub struct Pid {
    cfg: PidConfig,
    /// `kp` with the action's sign.
    kp: f64,
    /// `ki · T` with the action's sign: the integral's increment per unit error per sample.
    ki_t: f64,
    /// `kd / T` with the action's sign.
    kd_t: f64,
    /// Low-pass coefficient on D: `Tf / (Tf + T)`; 0 when unfiltered.
    alpha: f64,
    /// The integral term, gain inside; always within the output limits.
    integral: f64,
    /// The measurement of the previous sample, for the derivative; `None` before the first.
    last_measurement: Option<f64>,
    mode: Mode,
    terms: PidTerms,
}

impl Pid {
    /// A controller in automatic mode with a zero integral.
    pub fn new(cfg: PidConfig) -> Result<Self> {
        cfg.validate()?;
        let mut pid = Pid {
            kp: 0.0,
            ki_t: 0.0,
            kd_t: 0.0,
            alpha: 0.0,
            integral: 0.0,
            last_measurement: None,
            mode: Mode::Automatic,
            terms: PidTerms::default(),
            cfg,
        };
        pid.fold_gains();
        pid.integral = pid.clamp_output(0.0);
        Ok(pid)
    }

    fn fold_gains(&mut self) {
        let s = self.cfg.action.sign();
        let t = self.cfg.sample_time;
        self.kp = s * self.cfg.kp;
        self.ki_t = s * self.cfg.ki * t;
        self.kd_t = s * self.cfg.kd / t;
        let tf = self.cfg.derivative_filter;
        self.alpha = if tf > 0.0 { tf / (tf + t) } else { 0.0 };
    }

    fn clamp_output(&self, v: f64) -> f64 {
        v.clamp(self.cfg.output_min, self.cfg.output_max)
    }

    /// The configuration in force.
    pub fn config(&self) -> &PidConfig {
        &self.cfg
    }

    /// The terms of the last sample.
    pub fn terms(&self) -> PidTerms {
        self.terms
    }

    /// The current mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Changes gains (and filter, deadband, action). The integral is kept as it is, so the
    /// output does not jump: only the P and D terms of later samples change.
    pub fn retune(&mut self, kp: f64, ki: f64, kd: f64) -> Result<()> {
        let mut cfg = self.cfg.clone();
        cfg.kp = kp;
        cfg.ki = ki;
        cfg.kd = kd;
        cfg.validate()?;
        self.cfg = cfg;
        self.fold_gains();
        Ok(())
    }

    /// Sets the output limits; the integral and the current output are clamped into them.
    pub fn set_output_limits(&mut self, min: f64, max: f64) -> Result<()> {
        let mut cfg = self.cfg.clone();
        cfg.output_min = min;
        cfg.output_max = max;
        cfg.validate()?;
        self.cfg = cfg;
        self.integral = self.clamp_output(self.integral);
        self.terms.output = self.clamp_output(self.terms.output);
        Ok(())
    }

    /// Opens the loop: the output is `output` until [`Pid::set_automatic`].
    pub fn set_manual(&mut self, output: f64) {
        self.mode = Mode::Manual;
        self.terms = PidTerms {
            p: 0.0,
            i: 0.0,
            d: 0.0,
            output: self.clamp_output(output),
        };
    }

    /// Closes the loop without a bump: the integral takes the last output, and the derivative
    /// starts from `measurement`, so the first automatic output equals the last manual one
    /// when the error is zero.
    pub fn set_automatic(&mut self, measurement: f64) {
        self.integral = self.clamp_output(self.terms.output);
        self.last_measurement = Some(measurement);
        self.terms = PidTerms {
            p: 0.0,
            i: self.integral,
            d: 0.0,
            output: self.integral,
        };
        self.mode = Mode::Automatic;
    }

    /// Re-bases the integral so that `p + i + d` equals `output` (back-calculation): used
    /// when the output actually applied differs from the one computed.
    pub fn track_output(&mut self, output: f64) {
        let t = self.terms;
        self.integral = self.clamp_output(output - t.p - t.d);
        self.terms.i = self.integral;
        self.terms.output = self.clamp_output(output);
    }

    /// One sample: returns the new output. In manual mode only the measurement is tracked.
    pub fn update(&mut self, setpoint: f64, measurement: f64) -> f64 {
        self.update_gated(setpoint, measurement, IntegralGate::Open)
            .output
    }

    /// One sample with a restriction on the integral this time; returns all terms.
    pub fn update_gated(
        &mut self,
        setpoint: f64,
        measurement: f64,
        gate: IntegralGate,
    ) -> PidTerms {
        if self.mode == Mode::Manual {
            self.last_measurement = Some(measurement);
            return self.terms;
        }
        let raw_error = setpoint - measurement;
        let error = if raw_error.abs() <= self.cfg.deadband {
            0.0
        } else {
            raw_error
        };
        let increment = self.ki_t * error;
        let integrate = match gate {
            IntegralGate::Open => true,
            IntegralGate::NoIncrease => increment <= 0.0,
            IntegralGate::Frozen => false,
        };
        if integrate {
            self.integral = self.clamp_output(self.integral + increment);
        }
        let p = self.kp * error;
        let d_raw = match self.last_measurement {
            Some(prev) => -self.kd_t * (measurement - prev),
            None => 0.0,
        };
        let d = self.alpha * self.terms.d + (1.0 - self.alpha) * d_raw;
        self.last_measurement = Some(measurement);
        let output = self.clamp_output(p + self.integral + d);
        self.terms = PidTerms {
            p,
            i: self.integral,
            d,
            output,
        };
        self.terms
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(pid: &mut Pid, setpoint: f64, measurement: f64, samples: usize) -> f64 {
        let mut out = 0.0;
        for _ in 0..samples {
            out = pid.update(setpoint, measurement);
        }
        out
    }

    #[test]
    fn sample_time_should_be_folded_into_the_gains() {
        // The same continuous-time gain integrates the same error over the same 10 s to the
        // same value whatever the sample period.
        let mut fast = Pid::new(PidConfig::new(0.0, 0.5, 0.0, 0.1)).unwrap();
        let mut slow = Pid::new(PidConfig::new(0.0, 0.5, 0.0, 1.0)).unwrap();
        let a = run(&mut fast, 1.0, 0.0, 100);
        let b = run(&mut slow, 1.0, 0.0, 10);
        assert!((a - 5.0).abs() < 1e-9, "{a}");
        assert!((b - 5.0).abs() < 1e-9, "{b}");
        // Derivative: a ramp of 1 unit/s gives D = -kd whatever the period.
        let mut fast = Pid::new(PidConfig::new(0.0, 0.0, 2.0, 0.1)).unwrap();
        let mut slow = Pid::new(PidConfig::new(0.0, 0.0, 2.0, 1.0)).unwrap();
        fast.update(0.0, 0.0);
        slow.update(0.0, 0.0);
        let a = fast.update(0.0, 0.1);
        let b = slow.update(0.0, 1.0);
        assert!((a + 2.0).abs() < 1e-9 && (b + 2.0).abs() < 1e-9, "{a} {b}");
    }

    #[test]
    fn setpoint_change_should_not_kick_the_derivative() {
        let mut pid = Pid::new(PidConfig::new(1.0, 0.0, 10.0, 1.0)).unwrap();
        pid.update(0.0, 0.0);
        let t = pid.update_gated(5.0, 0.0, IntegralGate::Open);
        assert_eq!(
            t.d, 0.0,
            "derivative on the error would give -kd/T * 5 = 50"
        );
        assert_eq!(t.output, 5.0);
        // A measurement change does move D.
        let t = pid.update_gated(5.0, 1.0, IntegralGate::Open);
        assert!((t.d + 10.0).abs() < 1e-9, "{t:?}");
    }

    #[test]
    fn derivative_filter_should_smooth_a_noisy_measurement() {
        let mut raw = Pid::new(PidConfig::new(0.0, 0.0, 1.0, 1.0)).unwrap();
        let mut cfg = PidConfig::new(0.0, 0.0, 1.0, 1.0);
        cfg.derivative_filter = 4.0;
        let mut filtered = Pid::new(cfg).unwrap();
        let (mut max_raw, mut max_filtered) = (0.0f64, 0.0f64);
        for k in 0..50 {
            let y = if k % 2 == 0 { 1.0 } else { -1.0 };
            max_raw = max_raw.max(raw.update(0.0, y).abs());
            max_filtered = max_filtered.max(filtered.update(0.0, y).abs());
        }
        assert!((max_raw - 2.0).abs() < 1e-9, "{max_raw}");
        assert!(max_filtered < 0.5 * max_raw, "{max_filtered}");
    }

    #[test]
    fn retuning_ki_should_not_bump_the_output() {
        let mut pid = Pid::new(PidConfig::new(0.0, 1.0, 0.0, 1.0)).unwrap();
        run(&mut pid, 1.0, 0.0, 10); // integral = 10
        let before = pid.update(0.0, 0.0); // zero error: output = integral
        pid.retune(0.0, 5.0, 0.0).unwrap();
        let after = pid.update(0.0, 0.0);
        assert_eq!(before, 10.0);
        assert_eq!(
            after, before,
            "an integral kept as sum(e) would jump to 5 * 10"
        );
    }

    #[test]
    fn clamped_integral_should_recover_at_once_after_saturation() {
        let mut cfg = PidConfig::new(1.0, 1.0, 0.0, 1.0);
        cfg.output_min = 0.0;
        cfg.output_max = 10.0;
        let mut pid = Pid::new(cfg).unwrap();
        assert_eq!(run(&mut pid, 100.0, 0.0, 1000), 10.0);
        // Error reverses: without the clamp the integral would be ~100_000 and stay saturated.
        let out = pid.update(0.0, 1.0);
        assert!(out < 10.0, "{out}");
        assert_eq!(pid.terms().i, 9.0);
    }

    #[test]
    fn manual_to_auto_should_be_bumpless() {
        let mut pid = Pid::new(PidConfig::new(2.0, 0.5, 1.0, 1.0)).unwrap();
        run(&mut pid, 3.0, 1.0, 5);
        pid.set_manual(40.0);
        assert_eq!(pid.update(3.0, 2.5), 40.0);
        assert_eq!(pid.mode(), Mode::Manual);
        pid.set_automatic(3.0);
        // Error zero and measurement unchanged: the output stays where manual left it.
        let out = pid.update(3.0, 3.0);
        assert_eq!(out, 40.0);
    }

    #[test]
    fn reverse_action_should_raise_output_when_measurement_rises() {
        let mut cfg = PidConfig::new(1.0, 0.0, 0.0, 1.0);
        cfg.action = Action::Reverse;
        let mut reverse = Pid::new(cfg).unwrap();
        let mut direct = Pid::new(PidConfig::new(1.0, 0.0, 0.0, 1.0)).unwrap();
        assert_eq!(reverse.update(1.0, 3.0), 2.0);
        assert_eq!(direct.update(1.0, 3.0), -2.0);
    }

    #[test]
    fn deadband_should_hold_output_for_small_errors() {
        let mut cfg = PidConfig::new(1.0, 1.0, 0.0, 1.0);
        cfg.deadband = 0.1;
        let mut pid = Pid::new(cfg).unwrap();
        assert_eq!(
            run(&mut pid, 1.0, 0.95, 100),
            0.0,
            "integral would drift to 5"
        );
        assert!(pid.update(1.0, 0.5) > 0.0);
    }

    #[test]
    fn gate_should_stop_upward_integration_only() {
        let mut pid = Pid::new(PidConfig::new(0.0, 1.0, 0.0, 1.0)).unwrap();
        pid.update_gated(1.0, 0.0, IntegralGate::NoIncrease);
        assert_eq!(pid.terms().i, 0.0);
        pid.update_gated(0.0, 1.0, IntegralGate::NoIncrease);
        assert_eq!(pid.terms().i, -1.0);
        pid.update_gated(0.0, 1.0, IntegralGate::Frozen);
        assert_eq!(pid.terms().i, -1.0);
    }

    #[test]
    fn invalid_config_should_be_refused() {
        assert!(Pid::new(PidConfig::new(-1.0, 0.0, 0.0, 1.0)).is_err());
        assert!(Pid::new(PidConfig::new(1.0, 0.0, 0.0, 0.0)).is_err());
        assert!(Pid::new(PidConfig::new(f64::NAN, 0.0, 0.0, 1.0)).is_err());
        let mut cfg = PidConfig::new(1.0, 0.0, 0.0, 1.0);
        cfg.output_min = 2.0;
        cfg.output_max = 1.0;
        assert!(Pid::new(cfg).is_err());
    }
}
