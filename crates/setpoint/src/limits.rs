//! `setpoint server`'s request-limit flags: API Priority and Fairness on or off, the
//! in-flight limits (the total seats APF shares among priority levels) and the cap on watches
//! per user. Unset limits scale with this machine's cores (`FlowControlSettings::for_cores`).

use clap::Args;
use setpoint_apiserver::FlowControlSettings;

/// The flags.
#[derive(Debug, Args)]
pub(crate) struct LimitArgs {
    /// API Priority and Fairness (kube-apiserver's `--enable-priority-and-fairness`): requests
    /// classified by FlowSchemas into priority levels with fair queues. `false`: only the
    /// max-in-flight limits, refusing at once with 429 beyond them.
    #[arg(long, value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set)]
    pub(crate) enable_priority_and_fairness: bool,
    /// Reads executing at once; with APF, part of the total seats. Default: 40 per core.
    #[arg(long, value_name = "N")]
    pub(crate) max_requests_inflight: Option<usize>,
    /// Writes executing at once; with APF, the rest of the total seats. Default: 20 per core.
    #[arg(long, value_name = "N")]
    pub(crate) max_mutating_requests_inflight: Option<usize>,
    /// The most watches one user may hold open; one more gets 429. `0`: no cap.
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub(crate) max_watches_per_user: usize,
}

impl LimitArgs {
    /// The API server's settings from these flags and the request timeout.
    pub(crate) fn settings(&self, request_timeout: std::time::Duration) -> FlowControlSettings {
        let mut settings = FlowControlSettings::default();
        settings.enabled = self.enable_priority_and_fairness;
        if let Some(n) = self.max_requests_inflight {
            settings.max_requests_inflight = n;
        }
        if let Some(n) = self.max_mutating_requests_inflight {
            settings.max_mutating_requests_inflight = n;
        }
        settings.max_watches_per_user = self.max_watches_per_user;
        settings.request_timeout = request_timeout;
        settings
    }
}
