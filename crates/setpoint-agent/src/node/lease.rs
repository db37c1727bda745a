//! The node's heartbeat: the `coordination.k8s.io/v1` Lease `kube-node-lease/<node>`, renewed
//! every [`RENEW_INTERVAL`], as the kubelet's node lease controller does. The node lifecycle
//! controller reads a Lease whose `renewTime` stops advancing as a silent node.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, OwnerReference};
use kube::api::PostParams;
use kube::Api;

/// The namespace of node Leases.
pub(crate) const LEASE_NAMESPACE: &str = "kube-node-lease";
/// The Lease's `leaseDurationSeconds` (the kubelet's `--node-lease-duration-seconds`).
pub(crate) const LEASE_DURATION_SECONDS: i32 = 40;
/// How often the Lease is renewed: a quarter of its duration, as the kubelet does.
pub(crate) const RENEW_INTERVAL: Duration = Duration::from_secs(10);
/// First retry delay after a failed renewal; doubles up to [`RENEW_INTERVAL`].
const RETRY_BASE: Duration = Duration::from_millis(200);

/// The wait before the retry that follows `failures` consecutive failed renewals (or
/// registrations): 200 ms doubling, capped at [`RENEW_INTERVAL`].
pub(crate) fn retry_delay(failures: u32) -> Duration {
    2u32.checked_pow(failures.saturating_sub(1))
        .and_then(|f| RETRY_BASE.checked_mul(f))
        .map_or(RENEW_INTERVAL, |d| d.min(RENEW_INTERVAL))
}

/// The current wall-clock time, at the microsecond precision a `MicroTime` is stored with.
fn micro_time_now() -> MicroTime {
    let micros = chrono::Utc::now().timestamp_micros();
    MicroTime(
        k8s_openapi::jiff::Timestamp::from_microsecond(micros)
            .unwrap_or_else(|_| k8s_openapi::jiff::Timestamp::now()),
    )
}

/// One node's Lease and how to renew it.
///
/// Invariant: `cached`, when set, is the Lease as the API last returned it to us (so an update
/// from it carries the right `resourceVersion`); any failure clears it and the next renewal
/// reads the Lease again.
#[derive(Debug)]
pub(crate) struct NodeLease {
    /// The node, and the Lease's name and holder.
    node_name: String,
    /// The Node as owner of the Lease (so deleting the Node deletes its Lease).
    owner: Option<OwnerReference>,
    /// The Lease as last written or read.
    cached: Option<Lease>,
}

impl NodeLease {
    /// The Lease of `node_name`, not yet read.
    pub(crate) fn new(node_name: &str) -> NodeLease {
        NodeLease {
            node_name: node_name.to_owned(),
            owner: None,
            cached: None,
        }
    }

    /// Makes `node` (as the API returned it, with its uid) the Lease's owner from the next
    /// renewal on.
    pub(crate) fn set_owner(&mut self, node: &Node) {
        self.owner = node.metadata.uid.clone().map(|uid| OwnerReference {
            api_version: "v1".to_owned(),
            kind: "Node".to_owned(),
            name: self.node_name.clone(),
            uid,
            ..OwnerReference::default()
        });
    }

    /// Renews the Lease (`renewTime` now), creating it if absent. `api` addresses
    /// [`LEASE_NAMESPACE`].
    ///
    /// Not cancel-safe in a useful sense: a renewal dropped half-way may or may not have been
    /// written; the next one reads the Lease again.
    pub(crate) async fn renew(&mut self, api: &Api<Lease>) -> Result<(), kube::Error> {
        let result = self.try_renew(api).await;
        if result.is_err() {
            self.cached = None;
        }
        result
    }

    async fn try_renew(&mut self, api: &Api<Lease>) -> Result<(), kube::Error> {
        let base = match self.cached.take() {
            Some(lease) => Some(lease),
            None => api.get_opt(&self.node_name).await?,
        };
        let written = match base {
            Some(mut lease) => {
                self.stamp(&mut lease);
                api.replace(&self.node_name, &PostParams::default(), &lease)
                    .await?
            }
            None => {
                let mut lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.node_name.clone()),
                        namespace: Some(LEASE_NAMESPACE.to_owned()),
                        ..ObjectMeta::default()
                    },
                    spec: None,
                };
                self.stamp(&mut lease);
                api.create(&PostParams::default(), &lease).await?
            }
        };
        self.cached = Some(written);
        Ok(())
    }

    /// Sets holder, duration, renew time and owner on `lease`.
    fn stamp(&self, lease: &mut Lease) {
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        spec.holder_identity = Some(self.node_name.clone());
        spec.lease_duration_seconds = Some(LEASE_DURATION_SECONDS);
        spec.renew_time = Some(micro_time_now());
        if let Some(owner) = &self.owner {
            let owners = lease.metadata.owner_references.get_or_insert_with(Vec::new);
            if !owners.iter().any(|o| o.uid == owner.uid) {
                owners.retain(|o| o.kind != "Node");
                owners.push(owner.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_delay_should_double_from_200ms_up_to_the_renew_interval() {
        assert_eq!(retry_delay(1), Duration::from_millis(200));
        assert_eq!(retry_delay(2), Duration::from_millis(400));
        assert_eq!(retry_delay(6), Duration::from_millis(6_400));
        assert_eq!(retry_delay(7), RENEW_INTERVAL);
        assert_eq!(retry_delay(100), RENEW_INTERVAL);
    }

    #[test]
    fn stamp_should_set_holder_duration_and_replace_a_stale_node_owner() {
        let mut lease = NodeLease::new("n1");
        let node = Node {
            metadata: ObjectMeta {
                uid: Some("u2".to_owned()),
                ..ObjectMeta::default()
            },
            ..Node::default()
        };
        lease.set_owner(&node);
        let mut l = Lease {
            metadata: ObjectMeta {
                owner_references: Some(vec![OwnerReference {
                    kind: "Node".to_owned(),
                    uid: "u1".to_owned(),
                    ..OwnerReference::default()
                }]),
                ..ObjectMeta::default()
            },
            spec: None,
        };
        lease.stamp(&mut l);
        let spec = l.spec.expect("spec");
        assert_eq!(spec.holder_identity.as_deref(), Some("n1"));
        assert_eq!(spec.lease_duration_seconds, Some(40));
        assert!(spec.renew_time.is_some());
        let owners = l.metadata.owner_references.expect("owners");
        assert_eq!(owners.len(), 1);
        assert_eq!(owners[0].uid, "u2");
    }
}
