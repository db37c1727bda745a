//! ResourceQuota accounting shared by the quota loop (which writes `status.used`) and quota
//! admission (which charges a create against it): what an object uses (`usage`), which quotas
//! apply to it (`scopes`), and how a quota is checked and its usage written (here).
//!
//! Usage is kept in thousandths of a unit (`milli_value`), so `500m` of CPU and `1Gi` of memory
//! add up exactly; [`format()`] writes it back as Kubernetes writes quantities.

mod scopes;
mod usage;

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::quantity::milli_value;
pub use scopes::{is_best_effort, matches_scopes};
pub use usage::{object_usage, pod_usage, required_missing, resources_of};

/// Resource name → amount in thousandths.
pub type Usage = BTreeMap<String, i128>;

/// A quota's `status.hard` or `status.used` (or `spec.hard`) as [`Usage`]; quantities that do
/// not parse are left out.
pub fn usage_of(list: &Value) -> Usage {
    list.as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.clone(), milli_value(v.as_str()?)?)))
        .collect()
}

/// A [`Usage`] as a resource list: `{"pods": "3", "requests.memory": "1Gi"}`.
pub fn to_list(usage: &Usage) -> Value {
    Value::Object(
        usage
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(format(k, *v))))
            .collect::<Map<String, Value>>(),
    )
}

/// A quantity of resource `name` written as Kubernetes writes it: whole units plainly (`3`),
/// fractions in thousandths (`500m`), memory and storage with the largest binary suffix that
/// divides them exactly (`1Gi`, `1536Mi`).
pub fn format(name: &str, milli: i128) -> String {
    if milli % 1000 != 0 {
        return format!("{milli}m");
    }
    let value = milli / 1000;
    let bytes = name.contains("memory") || name.contains("storage") || name.contains("hugepages");
    if bytes && value != 0 {
        for (suffix, shift) in [
            ("Ei", 60),
            ("Pi", 50),
            ("Ti", 40),
            ("Gi", 30),
            ("Mi", 20),
            ("Ki", 10),
        ] {
            let unit = 1_i128 << shift;
            if value % unit == 0 {
                return format!("{}{suffix}", value / unit);
            }
        }
    }
    value.to_string()
}

/// Adds `b` to `a`, resource by resource.
pub fn add(a: &mut Usage, b: &Usage) {
    for (k, v) in b {
        *a.entry(k.clone()).or_default() += v;
    }
}

/// Why a charge was refused: the resources over their limit, with what was asked, what was
/// already used and the limit (kube-apiserver's `exceeded quota` message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exceeded {
    /// What the object asks of each exceeded resource.
    pub requested: Usage,
    /// What was used of each before it.
    pub used: Usage,
    /// The quota's limit of each.
    pub limited: Usage,
}

impl Exceeded {
    /// `exceeded quota: q, requested: pods=1, used: pods=3, limited: pods=3`.
    pub fn message(&self, quota: &str) -> String {
        format!(
            "exceeded quota: {quota}, requested: {}, used: {}, limited: {}",
            pretty(&self.requested),
            pretty(&self.used),
            pretty(&self.limited)
        )
    }
}

/// `a=1,b=2Gi` in name order.
fn pretty(usage: &Usage) -> String {
    usage
        .iter()
        .map(|(k, v)| format!("{k}={}", format(k, *v)))
        .collect::<Vec<_>>()
        .join(",")
}

/// What charging `delta` to a quota whose status is `status` comes to: the new `used`, or the
/// resources it would take over `hard`. Only the resources the quota limits are charged;
/// `Err(None)` if one of them has no usage recorded yet (the loop has not counted it).
pub fn charge(status: &Value, delta: &Usage) -> Result<Usage, Option<Exceeded>> {
    let hard = usage_of(&status["hard"]);
    let mut used = usage_of(&status["used"]);
    let mut over = Exceeded {
        requested: Usage::new(),
        used: Usage::new(),
        limited: Usage::new(),
    };
    for (name, amount) in delta {
        let Some(limit) = hard.get(name) else {
            continue;
        };
        let Some(current) = used.get(name).copied() else {
            return Err(None);
        };
        if *amount > 0 && current + amount > *limit {
            over.requested.insert(name.clone(), *amount);
            over.used.insert(name.clone(), current);
            over.limited.insert(name.clone(), *limit);
        }
        used.insert(name.clone(), current + amount);
    }
    if over.requested.is_empty() {
        Ok(used)
    } else {
        Err(Some(over))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn quantities_should_be_written_as_kubernetes_writes_them() {
        assert_eq!(format("pods", 3000), "3");
        assert_eq!(format("requests.cpu", 500), "500m");
        assert_eq!(format("requests.memory", 1_073_741_824_000), "1Gi");
        assert_eq!(format("limits.memory", 1_610_612_736_000), "1536Mi");
        assert_eq!(format("requests.memory", 0), "0");
    }

    #[test]
    fn a_charge_over_the_limit_should_name_the_resources_it_exceeds() {
        let status = json!({"hard": {"pods": "3", "requests.cpu": "1"}, "used": {"pods": "3", "requests.cpu": "0"}});
        let delta: Usage = [
            ("pods".into(), 1000),
            ("requests.cpu".into(), 100),
            ("count/pods".into(), 1000),
        ]
        .into();
        let over = charge(&status, &delta).unwrap_err().unwrap();
        assert_eq!(
            over.message("q"),
            "exceeded quota: q, requested: pods=1, used: pods=3, limited: pods=3"
        );
        let status = json!({"hard": {"pods": "4"}, "used": {"pods": "3"}});
        assert_eq!(charge(&status, &delta).unwrap()["pods"], 4000);
        assert_eq!(charge(&json!({"hard": {"pods": "4"}}), &delta), Err(None));
    }
}
