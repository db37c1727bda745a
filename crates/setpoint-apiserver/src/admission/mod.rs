//! Dynamic admission control as kube-apiserver 1.33 does it: the webhooks of
//! ValidatingWebhookConfigurations and MutatingWebhookConfigurations, and
//! ValidatingAdmissionPolicies with their bindings (`admissionregistration.k8s.io/v1`).
//!
//! - **When**: the handlers ask [`for_request`] for a request's admission and run the
//!   registry-store call inside it (`registry/store/admission.rs`). The registry store calls
//!   mutating webhooks after the kind's defaults and before its validation, and validating
//!   webhooks after validation, just before the write; on CREATE, UPDATE (PUT and every
//!   PATCH), DELETE (`oldObject` set, `object` null) and the `status` and `scale`
//!   subresources (a `scale` request's objects are `autoscaling/v1 Scale`s). Requests on the
//!   webhook configurations and policies themselves are never admitted.
//! - **Which** ([`matching`]): rules, `matchPolicy`, namespace and object selectors, then
//!   `matchConditions` (CEL).
//! - **In what order** ([`dispatch`]): mutating webhooks by configuration name, then list
//!   order; one with `reinvocationPolicy: IfNeeded` is called once more if a later webhook
//!   changed the object. Then the bound ValidatingAdmissionPolicies ([`policy_check`]), then
//!   validating webhooks one after the other in the same order
//!   (kube-apiserver calls them in parallel; the outcome is the same, the latency the sum).
//! - **How** ([`review`], and `webhook/` shared with CRD conversion): an `AdmissionReview` v1 over HTTPS,
//!   trusting `caBundle`, within `timeoutSeconds`; a webhook that cannot be reached, is too
//!   slow or answers nonsense fails the request (500, `failed calling webhook`) under
//!   `failurePolicy: Fail` and is skipped under `Ignore`. A denial is the webhook's status;
//!   warnings reach the client as `Warning` headers; patches (`JSONPatch`) are applied.
//! - **Dry runs**: webhooks are called with `dryRun: true`; one whose `sideEffects` is not
//!   `None`/`NoneOnDryRun` fails the request with 400 instead.
//!
//! - **Built-in plugins** ([`builtin`]): LimitRanger's defaults (then ServiceAccount's, when
//!   on) before the mutating webhooks and its bounds (then ServiceAccount's checks) before the
//!   validating ones; ResourceQuota after them, just before the write (kube-apiserver's plugin
//!   order).
//!
//! The configurations are read from their watch caches on each request and compiled again
//! only when one changed ([`configurations`]), so a new configuration applies to the
//! requests that follow it within the watch's delay (milliseconds).

mod builtin;
mod cache;
mod configurations;
mod dispatch;
mod matching;
mod policies;
mod policy_check;
mod review;

use std::any::Any;
use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{json, Value};

use crate::api::{Api, Served};
use crate::registry::ResourceDef;
use crate::webhook::Client;
use crate::User;
use cache::Compiled;
use configurations::{webhooks_of, Webhook};
use policies::{binding_of, policy_of, Binding, Policy};

const GROUP: &str = "admissionregistration.k8s.io";
const VALIDATING: &str = "validatingwebhookconfigurations";
const MUTATING: &str = "mutatingwebhookconfigurations";
const POLICIES: &str = "validatingadmissionpolicies";
const BINDINGS: &str = "validatingadmissionpolicybindings";

/// Admission's state for one API server: the compiled configurations and the connections to
/// webhooks. Kept in [`Api::admission_state`].
#[derive(Default)]
struct State {
    validating: Compiled<Arc<Webhook>>,
    mutating: Compiled<Arc<Webhook>>,
    policies: Compiled<Policy>,
    bindings: Compiled<Binding>,
    client: Client,
    /// ServiceAccount admission is on (`builtin/service_account.rs`).
    service_accounts: std::sync::atomic::AtomicBool,
}

fn state(api: &Api) -> Arc<State> {
    let any: Arc<dyn Any + Send + Sync> = api
        .admission_state
        .get_or_init(|| Arc::new(State::default()))
        .clone();
    // The slot only ever holds a `State` (set just above, here only).
    any.downcast::<State>().unwrap_or_default()
}

/// What a request asks, as admission needs it beyond the object.
pub(crate) struct RequestFacts<'a> {
    pub(crate) def: &'a Arc<ResourceDef>,
    /// The subresource (`status`, `scale`), `""` for the main resource.
    pub(crate) subresource: &'a str,
    /// The name in the URL (`""` on a create).
    pub(crate) name: &'a str,
    pub(crate) namespace: Option<&'a str>,
    pub(crate) user: Option<&'a User>,
    pub(crate) query: &'a BTreeMap<String, String>,
    /// The body of a DELETE (its `DeleteOptions`), `null` otherwise.
    pub(crate) delete_body: Value,
}

/// The admission of one request, or `None` when no webhook is configured (the common case,
/// which costs one comparison of cached pointers) or the request is on the webhook
/// configurations themselves.
pub(crate) fn for_request(api: &Api, facts: RequestFacts<'_>) -> Option<Arc<RequestAdmission>> {
    if facts.def.gvk.group == GROUP
        && [VALIDATING, MUTATING, POLICIES, BINDINGS].contains(&facts.def.plural.as_str())
    {
        return None;
    }
    let served = api.served();
    let state = state(api);
    let list = |plural: &str, configurations: &Compiled<Arc<Webhook>>| {
        served
            .store(GROUP, "v1", plural)
            .map(|s| configurations.get(s.cache(), webhooks_of))
            .unwrap_or_default()
    };
    let validating = list(VALIDATING, &state.validating);
    let mutating = list(MUTATING, &state.mutating);
    let compiled = |plural: &str| served.store(GROUP, "v1", plural).map(|s| s.cache().clone());
    let bindings = compiled(BINDINGS)
        .map(|c| state.bindings.get(&c, binding_of))
        .unwrap_or_default();
    let policies = match compiled(POLICIES) {
        Some(c) if !bindings.is_empty() => state.policies.get(&c, policy_of),
        _ => Arc::default(),
    };
    let builtin = builtin::for_request(
        &served,
        facts.def,
        facts.subresource,
        facts.namespace,
        builtin::service_account::enabled(api),
    );
    let certificates =
        builtin::certificates::for_request(api, facts.def, facts.subresource, facts.user);
    let node_restriction = builtin::node_restriction::for_request(
        &served,
        facts.user,
        facts.def,
        facts.subresource,
        facts.namespace,
    );
    if validating.is_empty()
        && mutating.is_empty()
        && bindings.is_empty()
        && builtin.is_none()
        && certificates.is_none()
        && node_restriction.is_none()
    {
        return None;
    }
    let user_info = match facts.user {
        Some(u) => {
            let mut info = json!({"username": u.name, "groups": u.groups});
            if !u.uid.is_empty() {
                info["uid"] = json!(u.uid);
            }
            if !u.extra.is_empty() {
                info["extra"] = json!(u.extra);
            }
            info
        }
        None => json!({}),
    };
    let equivalents = served
        .registry
        .versions_of(&facts.def.gvk.group, &facts.def.plural)
        .iter()
        .map(|d| d.gvk.version.clone())
        .collect();
    Some(Arc::new(RequestAdmission {
        state,
        served,
        def: facts.def.clone(),
        subresource: facts.subresource.to_owned(),
        name: facts.name.to_owned(),
        namespace: facts.namespace.map(str::to_owned),
        user_info,
        query: facts.query.clone(),
        delete_body: facts.delete_body,
        uid: crate::registry::meta::new_uid(),
        equivalents,
        validating,
        mutating,
        policies,
        bindings,
        builtin,
        certificates,
        node_restriction,
        warnings: parking_lot::Mutex::new(Vec::new()),
    }))
}

/// Admission for one request: what it is, who asked, and the webhooks in force when it
/// arrived.
pub(crate) struct RequestAdmission {
    state: Arc<State>,
    served: Arc<Served>,
    def: Arc<ResourceDef>,
    subresource: String,
    name: String,
    namespace: Option<String>,
    user_info: Value,
    query: BTreeMap<String, String>,
    delete_body: Value,
    /// The review uid, the same for every webhook of the request.
    uid: String,
    /// The served versions of the resource (for `matchPolicy: Equivalent`).
    equivalents: Vec<String>,
    validating: Arc<Vec<Arc<Webhook>>>,
    mutating: Arc<Vec<Arc<Webhook>>>,
    /// The ValidatingAdmissionPolicies and their bindings.
    policies: Arc<Vec<Policy>>,
    bindings: Arc<Vec<Binding>>,
    /// LimitRanger and ResourceQuota, when the namespace has a LimitRange or a quota.
    builtin: Option<builtin::Builtin>,
    /// The CertificateSigningRequest rules, on requests for them.
    certificates: Option<builtin::certificates::Certificates>,
    /// NodeRestriction, when a node asks.
    node_restriction: Option<builtin::node_restriction::NodeRestriction>,
    /// Warnings the webhooks returned, for the response's `Warning` headers.
    warnings: parking_lot::Mutex<Vec<String>>,
}

impl RequestAdmission {
    /// The warnings the webhooks returned so far.
    pub(crate) fn warnings(&self) -> Vec<String> {
        self.warnings.lock().clone()
    }

    /// The options of the request as the review's `options` carries them.
    fn options(&self, operation: &str, dry_run: bool) -> Value {
        let kind = match operation {
            "CREATE" => "CreateOptions",
            "DELETE" => "DeleteOptions",
            _ => "UpdateOptions",
        };
        let mut options = json!({"kind": kind, "apiVersion": "meta.k8s.io/v1"});
        if operation == "DELETE" {
            if let Some(body) = self.delete_body.as_object() {
                for (k, v) in body {
                    if k != "kind" && k != "apiVersion" {
                        options[k] = v.clone();
                    }
                }
            }
            if let Some(g) = self
                .query
                .get("gracePeriodSeconds")
                .and_then(|g| g.parse::<i64>().ok())
            {
                options["gracePeriodSeconds"] = json!(g);
            }
            if let Some(p) = self.query.get("propagationPolicy") {
                options["propagationPolicy"] = json!(p);
            }
        } else if let Some(manager) = self.query.get("fieldManager") {
            options["fieldManager"] = json!(manager);
        }
        if dry_run {
            options["dryRun"] = json!(["All"]);
        }
        options
    }
}
