//! Wall-clock timestamps as the API stores them: `MicroTime`, for Lease renewals and Event
//! times alike.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;

/// The current wall-clock time, at the microsecond precision a `MicroTime` is stored with (so a
/// record we wrote compares equal to the same record read back).
pub(crate) fn micro_time_now() -> MicroTime {
    let micros = chrono::Utc::now().timestamp_micros();
    MicroTime(
        k8s_openapi::jiff::Timestamp::from_microsecond(micros)
            .unwrap_or_else(|_| k8s_openapi::jiff::Timestamp::now()),
    )
}
