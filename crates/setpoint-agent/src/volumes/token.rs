//! The ServiceAccount tokens of projected volumes' `serviceAccountToken` sources, as the
//! kubelet's token manager keeps them: each is requested through the API
//! (`POST …/serviceaccounts/<sa>/token`) bound to the pod (its name and uid), for the source's
//! `audience` (none: the API server's own) and `expirationSeconds`, and kept until it needs a
//! refresh — once 80 % of its lifetime has passed, or 24 hours after it was issued, whichever
//! comes first. Every sync of the pod asks again (the worker resyncs every few seconds), so a
//! token is replaced in the volume soon after it turns due; the atomic writer leaves the file
//! alone while the token is the same.
//!
//! A failed refresh keeps serving the token it has while that has not expired (the pod keeps
//! working through a short API outage); a token that cannot be had at all fails the volume's
//! setup. A pod's tokens are forgotten when it is removed ([`ServiceAccountTokens::forget_pod`])
//! and expired ones at every call.
//!
//! The clock is injected ([`Clock`]) so that refreshes are tested without waiting.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Pod, ServiceAccount, ServiceAccountTokenProjection};
use kube::api::PostParams;
use parking_lot::Mutex;
use setpoint_runtime::Client;

use super::sources::SourceError;

/// The lifetime asked for when a source does not say (the API's default).
const DEFAULT_EXPIRATION_SECONDS: i64 = 3600;
/// A token is refreshed this long after it was issued at the latest.
const MAX_AGE_SECONDS: i64 = 24 * 60 * 60;
/// …and once this share (in percent) of its lifetime is left.
const REFRESH_WHEN_LEFT_PERCENT: i64 = 20;

/// The current time in Unix seconds.
pub(crate) type Clock = Arc<dyn Fn() -> i64 + Send + Sync>;

/// What identifies one token: who it is for and what it is bound to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    namespace: String,
    service_account: String,
    audience: Option<String>,
    expiration_seconds: i64,
    pod_name: String,
    pod_uid: String,
}

/// A token as the API issued it.
#[derive(Debug, Clone)]
struct Issued {
    token: String,
    /// Unix seconds.
    expires: i64,
    /// The lifetime the API granted (it may differ from the one asked for).
    lifetime: i64,
}

impl Issued {
    /// Whether the token is due for a refresh at `now`: 24 h old, or within the last 20 % of
    /// its lifetime.
    fn due(&self, now: i64) -> bool {
        let issued = self.expires - self.lifetime;
        now >= issued + MAX_AGE_SECONDS
            || now >= self.expires - self.lifetime * REFRESH_WHEN_LEFT_PERCENT / 100
    }

    fn expired(&self, now: i64) -> bool {
        now >= self.expires
    }
}

/// The agent's ServiceAccount tokens (shared by every pod worker).
#[derive(Clone)]
pub(crate) struct ServiceAccountTokens {
    client: Client,
    clock: Clock,
    tokens: Arc<Mutex<HashMap<Key, Issued>>>,
}

impl std::fmt::Debug for ServiceAccountTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceAccountTokens")
            .field("tokens", &self.tokens.lock().len())
            .finish_non_exhaustive()
    }
}

/// Unix seconds now, from the system clock.
fn system_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

impl ServiceAccountTokens {
    /// Tokens requested through `client`, on the system clock.
    pub(crate) fn new(client: Client) -> Self {
        Self::with_clock(client, Arc::new(system_now))
    }

    /// Tokens requested through `client`, on `clock`.
    pub(crate) fn with_clock(client: Client, clock: Clock) -> Self {
        ServiceAccountTokens {
            client,
            clock,
            tokens: Arc::default(),
        }
    }

    /// The token of `source` for `pod`: the one kept, or a new one when there is none or it
    /// is due (see the module docs).
    pub(crate) async fn token(
        &self,
        pod: &Pod,
        source: &ServiceAccountTokenProjection,
    ) -> Result<String, SourceError> {
        let key = Key {
            namespace: pod.metadata.namespace.clone().unwrap_or_default(),
            service_account: pod
                .spec
                .as_ref()
                .and_then(|s| s.service_account_name.clone())
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| "default".to_owned()),
            audience: source.audience.clone().filter(|a| !a.is_empty()),
            expiration_seconds: source
                .expiration_seconds
                .unwrap_or(DEFAULT_EXPIRATION_SECONDS),
            pod_name: pod.metadata.name.clone().unwrap_or_default(),
            pod_uid: pod.metadata.uid.clone().unwrap_or_default(),
        };
        let now = (self.clock)();
        let kept = {
            let mut tokens = self.tokens.lock();
            tokens.retain(|_, t| !t.expired(now));
            tokens.get(&key).cloned()
        };
        if let Some(kept) = &kept {
            if !kept.due(now) {
                return Ok(kept.token.clone());
            }
        }
        match self.request(&key, now).await {
            Ok(issued) => {
                let token = issued.token.clone();
                self.tokens.lock().insert(key, issued);
                Ok(token)
            }
            Err(e) => match kept {
                Some(kept) if !kept.expired(now) => {
                    tracing::warn!(error = %e, namespace = %key.namespace, pod = %key.pod_name,
                        "refreshing a ServiceAccount token failed; the current one is kept until it expires");
                    Ok(kept.token)
                }
                _ => Err(e),
            },
        }
    }

    /// Forgets the tokens of the pod with `uid`.
    pub(crate) fn forget_pod(&self, uid: &str) {
        self.tokens.lock().retain(|k, _| k.pod_uid != uid);
    }

    /// How many tokens are kept (for tests).
    #[cfg(test)]
    fn kept(&self) -> usize {
        self.tokens.lock().len()
    }

    async fn request(&self, key: &Key, now: i64) -> Result<Issued, SourceError> {
        let request = TokenRequest {
            spec: TokenRequestSpec {
                audiences: key.audience.iter().cloned().collect(),
                bound_object_ref: Some(BoundObjectReference {
                    api_version: Some("v1".to_owned()),
                    kind: Some("Pod".to_owned()),
                    name: Some(key.pod_name.clone()),
                    uid: Some(key.pod_uid.clone()),
                }),
                expiration_seconds: Some(key.expiration_seconds),
            },
            ..TokenRequest::default()
        };
        let answer = self
            .client
            .namespaced_api::<ServiceAccount>(&key.namespace)
            .create_token_request(&key.service_account, &PostParams::default(), &request)
            .await
            .map_err(|e| {
                SourceError(format!(
                    "requesting a token of serviceaccount {}/{}: {e}",
                    key.namespace, key.service_account
                ))
            })?;
        let status = answer.status.ok_or_else(|| {
            SourceError(format!(
                "the token request of serviceaccount {}/{} was answered without a token",
                key.namespace, key.service_account
            ))
        })?;
        let expires = status.expiration_timestamp.0.as_second();
        let lifetime = answer
            .spec
            .expiration_seconds
            .filter(|s| *s > 0)
            .unwrap_or_else(|| (expires - now).max(0));
        Ok(Issued {
            token: status.token,
            expires,
            lifetime,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicI64, Ordering};

    use super::*;

    /// A real in-process API server, a ServiceAccount `robot` and a pod running as it.
    async fn pod_of_robot(env: &setpoint_testenv::TestEnv) -> Pod {
        let client = env.client();
        let sa: ServiceAccount =
            serde_json::from_value(serde_json::json!({"metadata": {"name": "robot"}}))
                .expect("an SA");
        client
            .namespaced_api::<ServiceAccount>("default")
            .create(&PostParams::default(), &sa)
            .await
            .expect("SA created");
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {"serviceAccountName": "robot", "containers": [{"name": "c", "image": "i"}]}
        }))
        .expect("a pod");
        client
            .namespaced_api::<Pod>("default")
            .create(&PostParams::default(), &pod)
            .await
            .expect("pod created")
    }

    #[tokio::test]
    async fn tokens_should_be_kept_until_due_then_replaced_and_survive_a_failed_refresh() {
        let env = setpoint_testenv::TestEnv::start().await.expect("API");
        let pod = pod_of_robot(&env).await;
        let start = system_now();
        let now = Arc::new(AtomicI64::new(start));
        let clock = now.clone();
        let tokens = ServiceAccountTokens::with_clock(
            env.client(),
            Arc::new(move || clock.load(Ordering::SeqCst)),
        );
        let source = ServiceAccountTokenProjection {
            path: "token".to_owned(),
            expiration_seconds: Some(600),
            audience: None,
        };
        let first = tokens.token(&pod, &source).await.expect("a token");
        now.store(start + 470, Ordering::SeqCst);
        assert_eq!(tokens.token(&pod, &source).await.expect("kept"), first);
        // Past 80 % of ten minutes (allowing the server's clock a few seconds ahead).
        now.store(start + 485, Ordering::SeqCst);
        let second = tokens.token(&pod, &source).await.expect("refreshed");
        assert_ne!(second, first, "a due token is replaced");

        // The ServiceAccount gone, a due token (the clock runs ahead of the server's, so every
        // token is due from here on) is kept while it has not expired…
        env.client()
            .namespaced_api::<ServiceAccount>("default")
            .delete("robot", &kube::api::DeleteParams::default())
            .await
            .expect("SA deleted");
        now.store(start + 490, Ordering::SeqCst);
        assert_eq!(tokens.token(&pod, &source).await.expect("kept"), second);
        // …and then the volume cannot be made.
        now.store(start + 700, Ordering::SeqCst);
        assert!(tokens.token(&pod, &source).await.is_err());
        assert_eq!(tokens.kept(), 0, "expired tokens are dropped");
    }

    #[tokio::test]
    async fn a_removed_pods_tokens_should_be_forgotten() {
        let env = setpoint_testenv::TestEnv::start().await.expect("API");
        let pod = pod_of_robot(&env).await;
        let tokens = ServiceAccountTokens::new(env.client());
        let source = ServiceAccountTokenProjection {
            path: "token".to_owned(),
            expiration_seconds: None,
            audience: Some("vault".to_owned()),
        };
        tokens.token(&pod, &source).await.expect("a token");
        assert_eq!(tokens.kept(), 1);
        tokens.forget_pod("another");
        assert_eq!(tokens.kept(), 1);
        tokens.forget_pod(pod.metadata.uid.as_deref().expect("a uid"));
        assert_eq!(tokens.kept(), 0);
    }

    #[test]
    fn tokens_should_be_due_after_eighty_percent_of_their_lifetime_or_a_day() {
        let hour = Issued {
            token: String::new(),
            expires: 10_000 + 3600,
            lifetime: 3600,
        };
        assert!(!hour.due(10_000));
        assert!(!hour.due(10_000 + 2879));
        assert!(hour.due(10_000 + 2880));
        assert!(!hour.expired(10_000 + 3599));
        assert!(hour.expired(10_000 + 3600));
        let year = Issued {
            token: String::new(),
            expires: 365 * 86_400,
            lifetime: 365 * 86_400,
        };
        assert!(!year.due(86_399));
        assert!(year.due(86_400));
    }
}
