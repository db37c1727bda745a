//! The webhooks of ValidatingWebhookConfigurations and MutatingWebhookConfigurations,
//! compiled: rules, selectors, match conditions (CEL) and TLS settings ready to use. (`cache.rs`
//! keeps them compiled while the configurations do not change.)

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use setpoint_core::LabelSelector;

use super::client;
use crate::crd::cel::Expression;

/// `failurePolicy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FailurePolicy {
    Fail,
    Ignore,
}

/// `sideEffects`: whether the webhook may be called for a dry run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SideEffects {
    /// `None` or `NoneOnDryRun`: called with `dryRun: true`.
    SafeOnDryRun,
    /// `Some` or `Unknown` (from older API versions): a dry run that reaches it fails.
    Unsafe,
}

/// One rule of a webhook (`rules[]`).
#[derive(Debug, Default)]
pub(crate) struct Rule {
    pub(crate) operations: Vec<String>,
    pub(crate) groups: Vec<String>,
    pub(crate) versions: Vec<String>,
    pub(crate) resources: Vec<String>,
    /// `*`, `Cluster` or `Namespaced`.
    pub(crate) scope: String,
}

impl Rule {
    /// A rule as the API writes it (`operations`, `apiGroups`, `apiVersions`, `resources`,
    /// `scope`).
    pub(crate) fn from_json(r: &Value) -> Rule {
        let strings = |v: &Value| -> Vec<String> {
            v.as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        };
        Rule {
            operations: strings(&r["operations"]),
            groups: strings(&r["apiGroups"]),
            versions: strings(&r["apiVersions"]),
            resources: strings(&r["resources"]),
            scope: r["scope"].as_str().unwrap_or("*").to_owned(),
        }
    }
}

/// Where a webhook is.
#[derive(Debug)]
pub(crate) enum Endpoint {
    Url(String),
    Service {
        namespace: String,
        name: String,
        path: String,
        port: u16,
    },
}

/// One webhook, ready to match and call.
#[derive(Debug)]
pub(crate) struct Webhook {
    pub(crate) name: String,
    /// The configuration it belongs to.
    pub(crate) configuration: String,
    pub(crate) rules: Vec<Rule>,
    pub(crate) failure_policy: FailurePolicy,
    /// `matchPolicy: Equivalent` (else `Exact`).
    pub(crate) equivalent: bool,
    pub(crate) namespace_selector: LabelSelector,
    pub(crate) object_selector: LabelSelector,
    pub(crate) side_effects: SideEffects,
    pub(crate) timeout: Duration,
    /// `reinvocationPolicy: IfNeeded`.
    pub(crate) reinvoke: bool,
    /// `matchConditions`: name and expression, or why it does not compile.
    pub(crate) conditions: Vec<(String, Result<Expression, String>)>,
    pub(crate) endpoint: Endpoint,
    /// The TLS settings from `caBundle`, or why they are unusable.
    pub(crate) tls: Result<Arc<rustls::ClientConfig>, String>,
    /// A fingerprint of `caBundle`: webhooks with the same one share connections.
    pub(crate) tls_key: u64,
}

impl Webhook {
    /// Compiles one entry of a configuration's `webhooks`.
    pub(crate) fn compile(configuration: &str, w: &Value) -> Webhook {
        let rules = w["rules"]
            .as_array()
            .into_iter()
            .flatten()
            .map(Rule::from_json)
            .collect();
        // A selector that does not parse (validation refuses those) selects nothing.
        let selector = |v: &Value| {
            if v.is_null() {
                LabelSelector::everything()
            } else {
                LabelSelector::from_structured(v).unwrap_or_else(|_| LabelSelector::nothing())
            }
        };
        let config = &w["clientConfig"];
        let endpoint = match config["url"].as_str() {
            Some(url) => Endpoint::Url(url.to_owned()),
            None => Endpoint::Service {
                namespace: config["service"]["namespace"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                name: config["service"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                path: config["service"]["path"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                port: config["service"]["port"]
                    .as_u64()
                    .and_then(|p| u16::try_from(p).ok())
                    .unwrap_or(443),
            },
        };
        let tls_key = {
            use std::hash::{Hash as _, Hasher as _};
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            config["caBundle"].as_str().hash(&mut hasher);
            hasher.finish()
        };
        let ca = config["caBundle"].as_str().map(|b| {
            use base64::Engine as _;
            base64::engine::general_purpose::STANDARD
                .decode(b)
                .map_err(|e| format!("the caBundle is not base64: {e}"))
        });
        let tls = match ca {
            Some(Err(e)) => Err(e),
            Some(Ok(pem)) => client::tls_config(Some(&pem)),
            None => client::tls_config(None),
        };
        Webhook {
            name: w["name"].as_str().unwrap_or_default().to_owned(),
            configuration: configuration.to_owned(),
            rules,
            failure_policy: match w["failurePolicy"].as_str() {
                Some("Ignore") => FailurePolicy::Ignore,
                _ => FailurePolicy::Fail,
            },
            equivalent: w["matchPolicy"].as_str() != Some("Exact"),
            namespace_selector: selector(&w["namespaceSelector"]),
            object_selector: selector(&w["objectSelector"]),
            side_effects: match w["sideEffects"].as_str() {
                Some("None" | "NoneOnDryRun") => SideEffects::SafeOnDryRun,
                _ => SideEffects::Unsafe,
            },
            timeout: Duration::from_secs(w["timeoutSeconds"].as_u64().unwrap_or(10).clamp(1, 30)),
            reinvoke: w["reinvocationPolicy"].as_str() == Some("IfNeeded"),
            conditions: w["matchConditions"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|c| {
                    let name = c["name"].as_str().unwrap_or_default().to_owned();
                    let expression =
                        Expression::compile(c["expression"].as_str().unwrap_or_default());
                    (name, expression)
                })
                .collect(),
            endpoint,
            tls,
            tls_key,
        }
    }
}

/// The webhooks of a configuration object, in list order.
pub(crate) fn webhooks_of(configuration: &Value) -> Vec<Arc<Webhook>> {
    let name = configuration["metadata"]["name"]
        .as_str()
        .unwrap_or_default();
    configuration["webhooks"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|w| Arc::new(Webhook::compile(name, w)))
        .collect()
}
