//! `apiserver_longrunning_requests`: a watch counts from the moment it is answered until its
//! response body is dropped (the stream ended or the client went away); an upgraded stream
//! (`pods/exec`, …) while its splice runs ([`hold_longrunning`]).

use std::sync::Arc;

use http::Response;

use super::{RequestLabels, Telemetry};
use crate::server::{body_holding, Body};

/// Counts the long-running request of `labels` while `response`'s body lives.
pub(crate) fn track_longrunning(
    telemetry: &Arc<Telemetry>,
    labels: RequestLabels,
    response: Response<Body>,
) -> Response<Body> {
    telemetry.longrunning(&labels, 1);
    let guard = Guard {
        telemetry: telemetry.clone(),
        labels,
    };
    response.map(|inner| body_holding(inner, guard))
}

/// Counts the long-running request of `labels` until the returned guard is dropped.
pub(crate) fn hold_longrunning(telemetry: &Arc<Telemetry>, labels: RequestLabels) -> Guard {
    telemetry.longrunning(&labels, 1);
    Guard {
        telemetry: telemetry.clone(),
        labels,
    }
}

/// Takes the request off the count when dropped.
pub(crate) struct Guard {
    telemetry: Arc<Telemetry>,
    labels: RequestLabels,
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.telemetry.longrunning(&self.labels, -1);
    }
}
