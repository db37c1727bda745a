//! The `409 Conflict` of an apply that would change fields other managers own: one cause per
//! field (`FieldManagerConflict`, the field's path, its manager) and a message listing them by
//! manager, as kube-apiserver writes them.

use setpoint_core::fieldpath::{display_path, Conflict, Operation};
use setpoint_core::{ApiError, Cause, Details, Reason};

/// How a conflict names a manager: `"name"`, its subresource, and for an update its API
/// version and time.
fn describe(conflict: &Conflict) -> String {
    let mut out = format!("{:?}", conflict.manager.manager);
    if !conflict.manager.subresource.is_empty() {
        out.push_str(&format!(
            " with subresource {:?}",
            conflict.manager.subresource
        ));
    }
    if conflict.manager.operation == Operation::Update {
        out.push_str(&format!(" using {}", conflict.owner.api_version));
        if let Some(time) = &conflict.owner.time {
            out.push_str(&format!(" at {time}"));
        }
    }
    out
}

/// The error for `conflicts` (at least one).
pub(super) fn error(conflicts: &[Conflict]) -> ApiError {
    let causes: Vec<Cause> = conflicts
        .iter()
        .map(|c| {
            Cause::new(
                "FieldManagerConflict",
                display_path(&c.path),
                format!("conflict with {}", describe(c)),
            )
        })
        .collect();
    let message = if let [only] = conflicts {
        format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            describe(only),
            display_path(&only.path)
        )
    } else {
        let mut by_manager: Vec<(String, Vec<String>)> = Vec::new();
        for c in conflicts {
            let who = describe(c);
            let path = format!("- {}", display_path(&c.path));
            match by_manager.iter_mut().find(|(m, _)| *m == who) {
                Some((_, paths)) => paths.push(path),
                None => by_manager.push((who, vec![path])),
            }
        }
        by_manager.sort_by(|a, b| a.0.cmp(&b.0));
        let lines: Vec<String> = by_manager
            .into_iter()
            .flat_map(|(who, paths)| std::iter::once(format!("conflicts with {who}:")).chain(paths))
            .collect();
        format!(
            "Apply failed with {} conflicts: {}",
            conflicts.len(),
            lines.join("\n")
        )
    };
    let mut e = ApiError::new(Reason::Conflict, message);
    e.details = Some(Box::new(Details {
        causes,
        ..Default::default()
    }));
    e
}
