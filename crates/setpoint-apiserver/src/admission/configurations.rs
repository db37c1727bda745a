//! The webhooks of ValidatingWebhookConfigurations and MutatingWebhookConfigurations,
//! compiled: rules, selectors, match conditions (CEL) and TLS settings ready to use. (`cache.rs`
//! keeps them compiled while the configurations do not change.)

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use setpoint_core::LabelSelector;

use crate::crd::cel::Expression;
use crate::webhook::ClientConfig;

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
    /// Where it is and how its certificate is checked.
    pub(crate) client_config: ClientConfig,
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
            client_config: ClientConfig::parse(&w["clientConfig"]),
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
