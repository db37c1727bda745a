//! Kubernetes' version priority (`v2` before `v1` before `v2beta1` before `v1alpha1` before
//! anything else), which orders a group's versions in discovery: the first is preferred.

use std::cmp::Ordering;

/// `(major, stability rank, minor)` of a Kubernetes-style version (`v1`, `v2beta1`); `None`
/// for others.
fn version_key(v: &str) -> Option<(u64, u8, u64)> {
    let rest = v.strip_prefix('v')?;
    let digits = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    let major: u64 = rest[..digits].parse().ok()?;
    let tail = &rest[digits..];
    if tail.is_empty() {
        return Some((major, 2, 0));
    }
    let (rank, minor) = if let Some(m) = tail.strip_prefix("beta") {
        (1, m)
    } else if let Some(m) = tail.strip_prefix("alpha") {
        (0, m)
    } else {
        return None;
    };
    Some((major, rank, minor.parse().ok()?))
}

/// Kubernetes' version priority: a version that sorts first is preferred.
pub(crate) fn compare_versions(a: &str, b: &str) -> Ordering {
    match (version_key(a), version_key(b)) {
        (Some((ma, ra, na)), Some((mb, rb, nb))) => rb.cmp(&ra).then(mb.cmp(&ma)).then(nb.cmp(&na)),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => a.cmp(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_should_sort_as_kubernetes_prefers_them() {
        let mut v = vec![
            "v1alpha1", "foo", "v2beta1", "v1", "v1beta2", "v2", "v1beta1", "bar",
        ];
        v.sort_by(|a, b| compare_versions(a, b));
        assert_eq!(
            v,
            vec!["v2", "v1", "v2beta1", "v1beta2", "v1beta1", "v1alpha1", "bar", "foo"]
        );
    }
}
