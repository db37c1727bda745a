//! What a leader election is about (the [`LeaseLock`]) and how it is timed
//! ([`LeaderElectionConfig`]), with client-go's defaults and its validation rule
//! `lease duration > renew deadline > 1.2 × retry period`.

use std::time::Duration;

use rand::Rng;

use super::LeaderElectionError;

/// client-go's `JitterFactor`: the acquire loop waits a retry period plus up to this many more,
/// and the renew deadline must leave room for this many retry periods.
pub(crate) const JITTER_FACTOR: f64 = 1.2;

/// The `coordination.k8s.io/v1` Lease the candidates compete for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseLock {
    /// The Lease's namespace.
    pub namespace: String,
    /// The Lease's name (controller-runtime's `LeaderElectionID`).
    pub name: String,
}

impl LeaseLock {
    /// The Lease `name` in `namespace`.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> LeaseLock {
        LeaseLock {
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

/// Identity and timing of one candidate. [`Default`] gives client-go's timings (15 s / 10 s / 2 s),
/// an identity of the host name plus a random suffix, and release on stop.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaderElectionConfig {
    /// This candidate's name in the Lease's `holderIdentity`; unique among the candidates.
    pub identity: String,
    /// How long other candidates wait, from the moment they see the Lease change, before they
    /// may take it over. A whole number of seconds (the Lease stores seconds).
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew after its last successful renewal before it
    /// gives up leadership. Shorter than `lease_duration`, so the leader stops acting before
    /// anyone else may start.
    pub renew_deadline: Duration,
    /// How often the leader renews, and how often a candidate tries to acquire (jittered).
    pub retry_period: Duration,
    /// Whether a leader that stops on purpose clears the Lease so another candidate can take
    /// over at once, instead of after `lease_duration`.
    pub release_on_cancel: bool,
}

impl Default for LeaderElectionConfig {
    fn default() -> Self {
        LeaderElectionConfig {
            identity: default_identity(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            release_on_cancel: true,
        }
    }
}

impl LeaderElectionConfig {
    /// Checks that the timings are consistent and the identity is set.
    pub fn validate(&self) -> Result<(), LeaderElectionError> {
        if self.identity.is_empty() {
            return Err(LeaderElectionError::EmptyIdentity);
        }
        if self.retry_period.is_zero() {
            return Err(LeaderElectionError::ZeroRetryPeriod);
        }
        if self.lease_duration.subsec_nanos() != 0 || self.lease_duration.is_zero() {
            return Err(LeaderElectionError::LeaseDurationNotWholeSeconds(
                self.lease_duration,
            ));
        }
        if i32::try_from(self.lease_duration.as_secs()).is_err() {
            return Err(LeaderElectionError::LeaseDurationNotWholeSeconds(
                self.lease_duration,
            ));
        }
        if self.lease_duration <= self.renew_deadline {
            return Err(LeaderElectionError::RenewDeadlineNotBeforeLeaseEnd {
                lease_duration: self.lease_duration,
                renew_deadline: self.renew_deadline,
            });
        }
        if self.renew_deadline.as_secs_f64() <= JITTER_FACTOR * self.retry_period.as_secs_f64() {
            return Err(LeaderElectionError::RenewDeadlineTooShort {
                renew_deadline: self.renew_deadline,
                retry_period: self.retry_period,
            });
        }
        Ok(())
    }

    /// The Lease's `leaseDurationSeconds` (valid once [`validate`](Self::validate) passed).
    pub(crate) fn lease_duration_seconds(&self) -> i32 {
        i32::try_from(self.lease_duration.as_secs()).unwrap_or(i32::MAX)
    }

    /// The longest a single API request may take: controller-runtime's leader-election client
    /// timeout, `max(renew_deadline / 2, 1 s)`.
    pub(crate) fn request_timeout(&self) -> Duration {
        (self.renew_deadline / 2).max(Duration::from_secs(1))
    }

    /// A retry period stretched by a random part of up to [`JITTER_FACTOR`] retry periods, so
    /// candidates started together do not poll in lockstep.
    pub(crate) fn jittered_retry_period(&self) -> Duration {
        let extra = rand::thread_rng().gen_range(0.0..JITTER_FACTOR);
        self.retry_period + self.retry_period.mul_f64(extra)
    }
}

/// The host name (from `HOSTNAME`, else the kernel's) and `_` plus 8 random hex digits, so two
/// processes on one host never share an identity.
fn default_identity() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|h| h.trim().to_owned())
                .filter(|h| !h.is_empty())
        })
        .unwrap_or_else(|| "setpoint".to_owned());
    let suffix: u32 = rand::thread_rng().gen();
    format!("{host}_{suffix:08x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    #[test]
    fn config_should_default_to_client_go_timings_and_validate() {
        let config = LeaderElectionConfig::default();
        assert_eq!(config.lease_duration, secs(15.0));
        assert_eq!(config.renew_deadline, secs(10.0));
        assert_eq!(config.retry_period, secs(2.0));
        assert!(config.release_on_cancel);
        assert!(config.identity.contains('_'), "{}", config.identity);
        config.validate().expect("defaults are valid");
    }

    #[test]
    fn config_should_give_each_candidate_a_distinct_identity() {
        assert_ne!(
            LeaderElectionConfig::default().identity,
            LeaderElectionConfig::default().identity
        );
    }

    #[test]
    fn config_should_reject_a_renew_deadline_not_shorter_than_the_lease() {
        let config = LeaderElectionConfig {
            lease_duration: secs(10.0),
            renew_deadline: secs(10.0),
            ..Default::default()
        };
        let err = config.validate().expect_err("deadline == lease");
        assert!(matches!(
            err,
            LeaderElectionError::RenewDeadlineNotBeforeLeaseEnd { .. }
        ));
        assert!(err.to_string().contains("lease duration"), "{err}");
    }

    #[test]
    fn config_should_reject_a_renew_deadline_within_one_jittered_retry() {
        let config = LeaderElectionConfig {
            lease_duration: secs(15.0),
            renew_deadline: secs(2.4),
            retry_period: secs(2.0),
            ..Default::default()
        };
        assert!(matches!(
            config.validate(),
            Err(LeaderElectionError::RenewDeadlineTooShort { .. })
        ));
        let config = LeaderElectionConfig {
            renew_deadline: secs(2.5),
            ..config
        };
        config.validate().expect("2.5 s > 1.2 × 2 s");
    }

    #[test]
    fn config_should_reject_fractional_or_zero_lease_durations_and_empty_identity() {
        let base = LeaderElectionConfig {
            lease_duration: secs(2.0),
            renew_deadline: secs(1.5),
            retry_period: secs(0.4),
            ..Default::default()
        };
        base.validate().expect("short but consistent");
        for bad in [secs(2.5), Duration::ZERO] {
            let config = LeaderElectionConfig {
                lease_duration: bad,
                ..base.clone()
            };
            assert!(matches!(
                config.validate(),
                Err(LeaderElectionError::LeaseDurationNotWholeSeconds(_))
            ));
        }
        let config = LeaderElectionConfig {
            identity: String::new(),
            ..base.clone()
        };
        assert!(matches!(
            config.validate(),
            Err(LeaderElectionError::EmptyIdentity)
        ));
        let config = LeaderElectionConfig {
            retry_period: Duration::ZERO,
            ..base
        };
        assert!(matches!(
            config.validate(),
            Err(LeaderElectionError::ZeroRetryPeriod)
        ));
    }

    #[test]
    fn jitter_should_stay_within_one_to_two_point_two_retry_periods() {
        let config = LeaderElectionConfig::default();
        for _ in 0..100 {
            let d = config.jittered_retry_period();
            assert!(d >= config.retry_period && d <= config.retry_period.mul_f64(2.2));
        }
    }
}
