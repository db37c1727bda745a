//! What a `setpoint bench scale` run does: the store sizes it measures at and the size of the
//! update and delete samples, resolved from the flags. A [`Plan`]'s steps are never empty,
//! strictly ascending and positive.

use anyhow::{ensure, Result};

use crate::cli::ScaleBenchArgs;

/// The default steps below `--objects`.
const DEFAULT_STEPS: [u64; 3] = [100_000, 250_000, 500_000];
/// The steps of `--quick`.
const QUICK_STEPS: [u64; 3] = [10_000, 20_000, 50_000];
/// Updates, and deletes with re-creates, per step.
const DEFAULT_SAMPLE: u64 = 5_000;
/// The same with `--quick`.
const QUICK_SAMPLE: u64 = 1_000;

/// The sizes a run measures at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Plan {
    /// The number of objects stored at each step: not empty, strictly ascending, none 0.
    pub(super) steps: Vec<u64>,
    /// Updates, and deletes followed by re-creates, timed at each step (before clamping to the
    /// step's size, see [`Plan::sample_at`]); at least 1.
    pub(super) sample: u64,
}

impl Plan {
    /// The plan the flags ask for.
    pub(super) fn from_args(args: &ScaleBenchArgs) -> Result<Self> {
        Self::new(args.objects, &args.steps, args.sample, args.quick)
    }

    /// `steps` when given, else the `--quick` steps, else [`DEFAULT_STEPS`] below `objects`
    /// followed by `objects`; `sample` when given, else the default for `quick`.
    fn new(objects: u64, steps: &[u64], sample: Option<u64>, quick: bool) -> Result<Self> {
        let steps: Vec<u64> = if !steps.is_empty() {
            steps.to_vec()
        } else if quick {
            QUICK_STEPS.to_vec()
        } else {
            DEFAULT_STEPS
                .iter()
                .copied()
                .filter(|&step| step < objects)
                .chain([objects])
                .collect()
        };
        ensure!(
            steps.iter().all(|&step| step > 0),
            "--steps: every step must hold at least one object: {steps:?}"
        );
        ensure!(
            steps.windows(2).all(|pair| pair[0] < pair[1]),
            "--steps must be strictly ascending: {steps:?}"
        );
        let sample = sample.unwrap_or(if quick { QUICK_SAMPLE } else { DEFAULT_SAMPLE });
        ensure!(sample > 0, "--sample must be at least 1");
        Ok(Plan { steps, sample })
    }

    /// The sample at a step of `size` objects: [`Plan::sample`], at most `size`.
    pub(super) fn sample_at(&self, size: u64) -> u64 {
        self.sample.min(size)
    }
}

/// `n` indexes spread evenly over `0..size` (`n ≤ size`), ascending and distinct.
pub(super) fn spread(n: u64, size: u64) -> Vec<u64> {
    let n = n.min(size);
    (0..n)
        .map(|j| {
            // j·size/n in u128: exact, and below size for j < n.
            u64::try_from(u128::from(j) * u128::from(size) / u128::from(n)).unwrap_or(size - 1)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_steps_should_end_at_objects() {
        let plan = Plan::new(1_000_000, &[], None, false).expect("plan");
        assert_eq!(plan.steps, [100_000, 250_000, 500_000, 1_000_000]);
        assert_eq!(plan.sample, 5_000);
        let plan = Plan::new(200_000, &[], None, false).expect("plan");
        assert_eq!(plan.steps, [100_000, 200_000]);
        let plan = Plan::new(250_000, &[], None, false).expect("plan");
        assert_eq!(plan.steps, [100_000, 250_000]);
        let plan = Plan::new(5_000, &[], None, false).expect("plan");
        assert_eq!(plan.steps, [5_000]);
    }

    #[test]
    fn quick_should_take_small_steps_and_samples_unless_told_otherwise() {
        let plan = Plan::new(1_000_000, &[], None, true).expect("plan");
        assert_eq!(plan.steps, [10_000, 20_000, 50_000]);
        assert_eq!(plan.sample, 1_000);
        let plan = Plan::new(1_000_000, &[300, 600], Some(50), true).expect("plan");
        assert_eq!(plan.steps, [300, 600]);
        assert_eq!(plan.sample, 50);
    }

    #[test]
    fn steps_should_be_refused_unless_strictly_ascending_and_positive() {
        assert!(Plan::new(10, &[20, 10], None, false).is_err());
        assert!(Plan::new(10, &[10, 10], None, false).is_err());
        assert!(Plan::new(10, &[0, 10], None, false).is_err());
        assert!(Plan::new(10, &[1, 10], Some(0), false).is_err());
    }

    #[test]
    fn sample_should_be_clamped_to_the_step() {
        let plan = Plan::new(0, &[300, 10_000], Some(1_000), false).expect("plan");
        assert_eq!(plan.sample_at(300), 300);
        assert_eq!(plan.sample_at(10_000), 1_000);
    }

    #[test]
    fn spread_should_give_distinct_indexes_inside_the_range() {
        assert_eq!(spread(4, 10), [0, 2, 5, 7]);
        assert_eq!(spread(3, 3), [0, 1, 2]);
        assert_eq!(spread(5, 2), [0, 1]);
        let big = spread(5_000, 1_000_000);
        assert_eq!(big.len(), 5_000);
        assert!(big.windows(2).all(|w| w[0] < w[1]));
        assert!(big.iter().all(|&i| i < 1_000_000));
    }
}
