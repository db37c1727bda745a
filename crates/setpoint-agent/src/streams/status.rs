//! What the error channel/stream reports when a remote command ends: a `Status` (without
//! `kind`/`apiVersion`, as the kubelet writes it) for v4 and later, plain text (nothing on
//! success) for older protocols; and the `Status` answers refusing an upgrade.

use bytes::Bytes;
use serde_json::json;

use super::CommandOutcome;

/// The error channel's payload for `outcome`, or `None` when nothing is written.
pub(crate) fn outcome_payload(outcome: &CommandOutcome, status_json: bool) -> Option<Bytes> {
    if !status_json {
        return match outcome {
            CommandOutcome::Success => None,
            other => Some(Bytes::from(outcome_message(other))),
        };
    }
    let value = match outcome {
        CommandOutcome::Success => json!({"metadata": {}, "status": "Success"}),
        CommandOutcome::ExitCode(code) => json!({
            "metadata": {},
            "status": "Failure",
            "message": outcome_message(outcome),
            "reason": "NonZeroExitCode",
            "details": {"causes": [{"reason": "ExitCode", "message": code.to_string()}]},
        }),
        CommandOutcome::Error(_) => json!({
            "metadata": {},
            "status": "Failure",
            "message": outcome_message(outcome),
            "reason": "InternalError",
            "code": 500,
        }),
    };
    Some(Bytes::from(value.to_string()))
}

fn outcome_message(outcome: &CommandOutcome) -> String {
    match outcome {
        CommandOutcome::Success => String::new(),
        CommandOutcome::ExitCode(code) => {
            format!("command terminated with non-zero exit code: exit status {code}")
        }
        CommandOutcome::Error(message) => {
            format!("error executing command in container: {message}")
        }
    }
}
