//! Enforcing ValidatingAdmissionPolicies, as kube-apiserver's `ValidatingAdmissionPolicy`
//! plugin does, before the validating webhooks: for every binding whose policy exists and
//! whose match constraints (the policy's, then the binding's `matchResources`) select the
//! request, once per parameter object (`paramRef`: by name, or every object its selector
//! picks; none found is allowed or denied as `parameterNotFoundAction` says), the policy's
//! match conditions, then its variables and validations in CEL, with `object`, `oldObject`,
//! `request`, `params`, `namespaceObject` and `variables`. A failed validation is handled as
//! the binding's `validationActions` say: `Deny` refuses the request
//! (`ValidatingAdmissionPolicy 'P' with binding 'B' denied request: MESSAGE`, with the
//! validation's reason, 422 `Invalid` by default), `Warn` adds a warning, `Audit` does nothing
//! (there is no audit log). An expression that fails to evaluate is a failure under
//! `failurePolicy: Fail` and is skipped under `Ignore`; so is a binding that cannot be
//! configured (its parameters cannot be read).

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;
use setpoint_core::{ApiError, Cause, Details, GroupResource, Reason};

use super::matching::Attributes;
use super::policies::{Binding, Compiled, MatchResources, ParamRef, Policy, Request};
use super::RequestAdmission;
use crate::crd::cel::to_cel;
use crate::registry::store::Operation;

/// A validation that did not hold.
struct Failure {
    message: String,
    reason: Reason,
}

impl RequestAdmission {
    /// Applies the bound policies to the request.
    pub(super) async fn check_policies(
        &self,
        operation: Operation,
        object: Option<&Value>,
        old: Option<&Value>,
        dry_run: bool,
    ) -> Result<(), ApiError> {
        if self.bindings.is_empty() {
            return Ok(());
        }
        let policies: HashMap<&str, &Policy> =
            self.policies.iter().map(|p| (p.name.as_str(), p)).collect();
        let namespace = self.rule_namespace(object, old);
        let name = object
            .or(old)
            .and_then(|o| o["metadata"]["name"].as_str())
            .unwrap_or(&self.name)
            .to_owned();
        let labels = self.namespace_labels(&namespace, object, old).await?;
        let request = Request {
            attributes: Attributes {
                operation: operation.as_str(),
                group: &self.def.gvk.group,
                version: &self.def.gvk.version,
                resource: &self.def.plural,
                subresource: &self.subresource,
                namespace: &namespace,
            },
            equivalents: &self.equivalents,
            name: &name,
            namespace_labels: labels.as_ref(),
            object,
            old,
        };
        let selected = |m: &MatchResources| m.matches(&request);
        let target = Target {
            resource: self.def.group_resource(),
            name: &name,
        };
        let mut context: Option<Context> = None;
        for binding in self.bindings.iter() {
            let Some(policy) = policies.get(binding.policy.as_str()) else {
                continue;
            };
            if !selected(&policy.constraints)
                || binding.resources.as_ref().is_some_and(|m| !selected(m))
            {
                continue;
            }
            let context = match &mut context {
                Some(c) => &*c,
                None => {
                    let request_json = self
                        .review_request(
                            &self.def.gvk.version,
                            operation,
                            &name,
                            &namespace,
                            (object, old),
                            dry_run,
                        )
                        .to_json();
                    let namespace_object = self.namespace_object(&namespace).await;
                    &*context.insert(Context::new(object, old, &request_json, &namespace_object)?)
                }
            };
            let params = match self.params(policy, binding, &namespace).await {
                Ok(params) => params,
                Err(e) if policy.fail => {
                    return Err(deny(&target, policy, binding, &e, Reason::Invalid))
                }
                Err(_) => continue,
            };
            for param in params {
                for failure in evaluate(policy, context, &param)? {
                    if binding.deny {
                        return Err(deny(
                            &target,
                            policy,
                            binding,
                            &failure.message,
                            failure.reason,
                        ));
                    }
                    if binding.warn {
                        self.warnings.lock().push(format!(
                            "Validation failed for ValidatingAdmissionPolicy '{}' with binding '{}': {}",
                            policy.name, binding.name, failure.message
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// The parameter objects of a binding (`[null]` for a policy without `paramKind`).
    async fn params(
        &self,
        policy: &Policy,
        binding: &Binding,
        request_namespace: &str,
    ) -> Result<Vec<Value>, String> {
        let Some((api_version, kind)) = &policy.param_kind else {
            return Ok(vec![Value::Null]);
        };
        let Some(param_ref) = &binding.param_ref else {
            return Err(format!(
                "policy {:?} has a paramKind, but its binding has no paramRef",
                policy.name
            ));
        };
        let def = self
            .served
            .registry
            .all()
            .find(|d| d.gvk.api_version() == *api_version && d.gvk.kind == *kind)
            .ok_or_else(|| format!("paramKind {api_version} {kind} is not served"))?;
        let store = self
            .served
            .store(&def.gvk.group, &def.gvk.version, &def.plural)
            .ok_or_else(|| format!("paramKind {api_version} {kind} is not served"))?;
        let namespace = param_namespace(param_ref, request_namespace, def.namespaced)?;
        let found = match &param_ref.name {
            Some(name) => match store.get(namespace, name).await {
                Ok(object) => vec![object],
                Err(e) if e.reason == Reason::NotFound => Vec::new(),
                Err(e) => return Err(e.message),
            },
            None => {
                let prefix = def.collection_prefix(namespace);
                let (objects, _) = store.cache().snapshot();
                objects
                    .iter()
                    .filter(|(key, o)| {
                        key.starts_with(prefix.as_bytes()) && param_ref.selector.matches(&o.labels)
                    })
                    .filter_map(|(_, o)| serde_json::from_slice(&o.json.bytes()).ok())
                    .collect()
            }
        };
        if found.is_empty() && param_ref.deny_if_missing {
            return Err(
                "no params found for policy binding with `Deny` parameterNotFoundAction".to_owned(),
            );
        }
        Ok(found)
    }

    /// The request's namespace object (`null` for cluster-scoped requests).
    async fn namespace_object(&self, namespace: &str) -> Value {
        if namespace.is_empty() || self.is_namespace_resource() {
            return Value::Null;
        }
        match self.served.store("", "v1", "namespaces") {
            Some(store) => store.get(None, namespace).await.unwrap_or(Value::Null),
            None => Value::Null,
        }
    }
}

/// Where the parameters are looked for: the `paramRef`'s namespace, else the request's
/// (a namespaced parameter kind needs one).
fn param_namespace<'a>(
    param_ref: &'a ParamRef,
    request_namespace: &'a str,
    namespaced: bool,
) -> Result<Option<&'a str>, String> {
    if !namespaced {
        return Ok(None);
    }
    match param_ref.namespace.as_deref() {
        Some(ns) => Ok(Some(ns)),
        None if !request_namespace.is_empty() => Ok(Some(request_namespace)),
        None => Err("cannot use a namespaced paramRef without a namespace in a policy binding that matches cluster-scoped resources".to_owned()),
    }
}

/// The CEL values every expression of a request sees.
struct Context {
    object: cel::Value,
    old_object: cel::Value,
    request: cel::Value,
    namespace_object: cel::Value,
}

impl Context {
    fn new(
        object: Option<&Value>,
        old: Option<&Value>,
        request: &Value,
        namespace_object: &Value,
    ) -> Result<Context, ApiError> {
        let cel = |v: &Value| {
            to_cel(v).map_err(|e| {
                ApiError::internal(format!("the request does not convert to CEL: {e}"))
            })
        };
        Ok(Context {
            object: cel(object.unwrap_or(&Value::Null))?,
            old_object: cel(old.unwrap_or(&Value::Null))?,
            request: cel(request)?,
            namespace_object: cel(namespace_object)?,
        })
    }
}

/// The variables of one evaluation.
fn variables<'a>(
    context: &Context,
    params: &cel::Value,
    computed: &cel::Value,
) -> Vec<(&'a str, cel::Value)> {
    vec![
        ("object", context.object.clone()),
        ("oldObject", context.old_object.clone()),
        ("request", context.request.clone()),
        ("params", params.clone()),
        ("namespaceObject", context.namespace_object.clone()),
        ("variables", computed.clone()),
    ]
}

/// Evaluates `expression`; `Err` is the message of a failure to evaluate.
fn run(expression: &Compiled, vars: Vec<(&str, cel::Value)>) -> Result<cel::Value, String> {
    let (source, compiled) = expression;
    let compiled = compiled
        .as_ref()
        .map_err(|e| format!("compilation of '{source}' failed: {e}"))?;
    compiled
        .evaluate_values(vars)
        .map_err(|e| format!("expression '{source}' resulted in error: {e}"))
}

/// The failures of a policy for one parameter object (none if its match conditions exclude
/// the request); `Err` when a match condition fails to evaluate under `failurePolicy: Fail`.
fn evaluate(policy: &Policy, context: &Context, params: &Value) -> Result<Vec<Failure>, ApiError> {
    let params = to_cel(params)
        .map_err(|e| ApiError::internal(format!("the params do not convert to CEL: {e}")))?;
    let mut computed = cel::Value::from(HashMap::<String, cel::Value>::new());
    let mut condition_error = None;
    for (name, condition) in &policy.conditions {
        match run(condition, variables(context, &params, &computed)) {
            Ok(cel::Value::Bool(true)) => {}
            Ok(cel::Value::Bool(false)) => return Ok(Vec::new()),
            Ok(other) => {
                condition_error.get_or_insert(format!(
                    "matchCondition {name:?} returned {other:?}, not a bool"
                ));
            }
            Err(e) => {
                condition_error.get_or_insert(format!("matchCondition {name:?}: {e}"));
            }
        }
    }
    if let Some(e) = condition_error {
        return if policy.fail {
            Ok(vec![Failure {
                message: e,
                reason: Reason::Invalid,
            }])
        } else {
            Ok(Vec::new())
        };
    }
    // Variables in order, each seeing the ones before it; one that fails is left out, so
    // only the expressions that use it fail.
    let mut values: BTreeMap<String, cel::Value> = BTreeMap::new();
    for (name, expression) in &policy.variables {
        if let Ok(value) = run(expression, variables(context, &params, &computed)) {
            values.insert(name.clone(), value);
            computed = cel::Value::from(values.clone().into_iter().collect::<HashMap<_, _>>());
        }
    }
    let mut failures = Vec::new();
    for validation in &policy.validations {
        let vars = variables(context, &params, &computed);
        match run(&validation.expression, vars) {
            Ok(cel::Value::Bool(true)) => {}
            Ok(cel::Value::Bool(false)) => {
                let message = validation
                    .message_expression
                    .as_ref()
                    .and_then(|m| match run(m, variables(context, &params, &computed)) {
                        Ok(cel::Value::String(s)) if !s.trim().is_empty() && !s.contains('\n') => {
                            Some(s.to_string())
                        }
                        _ => None,
                    })
                    .or_else(|| validation.message.clone())
                    .unwrap_or_else(|| format!("failed expression: {}", validation.expression.0));
                failures.push(Failure {
                    message,
                    reason: validation.reason,
                });
            }
            Ok(other) if policy.fail => failures.push(Failure {
                message: format!(
                    "expression '{}' resulted in a {other:?}, not a bool",
                    validation.expression.0
                ),
                reason: Reason::Invalid,
            }),
            Err(e) if policy.fail => failures.push(Failure {
                message: e,
                reason: Reason::Invalid,
            }),
            Ok(_) | Err(_) => {}
        }
    }
    Ok(failures)
}

/// The error a denial is, as kube-apiserver builds it: a "forbidden" message naming the
/// object, the validation's reason and its code, and the denial as the one cause (kubectl
/// prints `The deployments "web" is invalid: : ValidatingAdmissionPolicy …`).
fn deny(
    target: &Target<'_>,
    policy: &Policy,
    binding: &Binding,
    message: &str,
    reason: Reason,
) -> ApiError {
    let denial = format!(
        "ValidatingAdmissionPolicy '{}' with binding '{}' denied request: {message}",
        policy.name, binding.name
    );
    let mut error = ApiError::new(
        reason,
        format!(
            "{} {:?} is forbidden: {denial}",
            target.resource, target.name
        ),
    );
    error.details = Some(Box::new(Details {
        name: target.name.to_owned(),
        group: target.resource.group.clone(),
        kind: target.resource.resource.clone(),
        causes: vec![Cause::new("", "", denial)],
        ..Default::default()
    }));
    error
}

/// What a denial names.
struct Target<'a> {
    resource: GroupResource,
    name: &'a str,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::policies::policy_of;
    use super::*;

    fn context(object: &Value) -> Context {
        let request = json!({"operation": "CREATE", "namespace": "default"});
        let namespace = json!({"metadata": {"name": "default", "labels": {"env": "prod"}}});
        Context::new(Some(object), None, &request, &namespace).unwrap()
    }

    fn policy(spec: Value) -> Policy {
        policy_of(&json!({"metadata": {"name": "p"}, "spec": spec})).remove(0)
    }

    fn messages(failures: &[Failure]) -> Vec<&str> {
        failures.iter().map(|f| f.message.as_str()).collect()
    }

    #[test]
    fn validations_should_see_params_variables_and_the_namespace() {
        let p = policy(json!({
            "variables": [{"name": "replicas", "expression": "object.spec.replicas"},
                {"name": "limit", "expression": "int(params.data.max)"}],
            "validations": [
                {"expression": "variables.replicas <= variables.limit",
                    "messageExpression": "'replicas must be at most ' + params.data.max", "reason": "Forbidden"},
                {"expression": "namespaceObject.metadata.labels.env == 'prod' && request.operation == 'CREATE'"},
                {"expression": "object.spec.replicas > 100", "message": "fixed message"},
                {"expression": "object.spec.replicas > 100"},
            ],
        }));
        let params = json!({"data": {"max": "3"}});
        let failures = evaluate(&p, &context(&json!({"spec": {"replicas": 5}})), &params).unwrap();
        assert_eq!(
            messages(&failures),
            [
                "replicas must be at most 3",
                "fixed message",
                "failed expression: object.spec.replicas > 100"
            ]
        );
        assert_eq!(failures[0].reason, Reason::Forbidden);
        assert_eq!(failures[1].reason, Reason::Invalid);
    }

    #[test]
    fn errors_should_follow_the_failure_policy_and_conditions_should_exclude() {
        let spec = json!({
            "matchConditions": [{"name": "big", "expression": "object.spec.replicas > 1"}],
            "validations": [{"expression": "object.spec.missing.field == 1"}],
        });
        let p = policy(spec.clone());
        let failures = evaluate(
            &p,
            &context(&json!({"spec": {"replicas": 5}})),
            &Value::Null,
        )
        .unwrap();
        assert_eq!(failures.len(), 1);
        assert!(
            failures[0]
                .message
                .starts_with("expression 'object.spec.missing.field == 1' resulted in error"),
            "{}",
            failures[0].message
        );
        // Excluded by the match condition.
        assert!(evaluate(
            &p,
            &context(&json!({"spec": {"replicas": 1}})),
            &Value::Null
        )
        .unwrap()
        .is_empty());
        let mut ignore = spec;
        ignore["failurePolicy"] = json!("Ignore");
        let p = policy(ignore);
        assert!(evaluate(
            &p,
            &context(&json!({"spec": {"replicas": 5}})),
            &Value::Null
        )
        .unwrap()
        .is_empty());
    }

    #[test]
    fn a_namespaced_param_needs_a_namespace() {
        let by_name = |namespace: Option<&str>| ParamRef {
            name: Some("limits".into()),
            namespace: namespace.map(str::to_owned),
            selector: setpoint_core::LabelSelector::everything(),
            deny_if_missing: true,
        };
        assert_eq!(
            param_namespace(&by_name(Some("kube-system")), "default", true),
            Ok(Some("kube-system"))
        );
        assert_eq!(
            param_namespace(&by_name(None), "default", true),
            Ok(Some("default"))
        );
        assert!(param_namespace(&by_name(None), "", true).is_err());
        assert_eq!(param_namespace(&by_name(None), "", false), Ok(None));
    }
}
