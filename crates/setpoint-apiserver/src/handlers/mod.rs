//! The REST API: routes every request the transport has authenticated, decodes it, calls the
//! resource's registry store (`registry/store/`) and encodes the answer. No storage rule lives
//! here.

mod component_status;
mod delete;
mod discovery;
mod eviction;
mod openapi;
mod params;
mod pod_log;
mod pod_stream;
mod read;
pub(crate) mod response;
mod review;
mod subresource;
mod update;
mod watch;
mod write;

// Served beside the registry rather than from it (see its docs).
mod metrics;
// ServiceAccount issuer discovery and TokenRequest (the authenticator is `auth/`).
mod oidc;
mod token_request;

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use setpoint_core::{ApiError, GroupResource};

use crate::api::Api;
use crate::auth::User;
use crate::registry::managed_fields::{field_manager_causes, manager_name, FieldManager};
use crate::registry::store::RegistryStore;
use crate::registry::ResourceDef;
use crate::request_info::{self, ResourceRequest, Target, Verb};
use crate::telemetry::{track_longrunning, RequestLabels};
use response::Body;
use setpoint_core::fieldpath::Operation;

/// The content type of `/metrics`: Prometheus' text format 0.0.4.
const METRICS_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The version the server reports on `/version` (the Kubernetes API it speaks).
pub(crate) const KUBERNETES_MINOR: &str = "33";

impl Api {
    /// Answers one authenticated request.
    pub async fn handle(&self, request: Request<Bytes>) -> Response<Body> {
        let started = std::time::Instant::now();
        let labels = RequestLabels::of(&request);
        let response = match self.route(request).await {
            Ok(response) => response,
            Err(e) => response::error(&e),
        };
        let code = response.status();
        self.telemetry
            .request(&labels, code.as_u16(), started.elapsed());
        if labels.verb == "WATCH" && code == StatusCode::OK {
            return track_longrunning(&self.telemetry, labels, response);
        }
        response
    }

    async fn route(&self, request: Request<Bytes>) -> Result<Response<Body>, ApiError> {
        // The web console's own endpoints authorize what they do themselves.
        if crate::console::owns(request.uri().path()) {
            return crate::console::serve(self, &request);
        }
        let query = request_info::parse_query(request.uri().query());
        let target = request_info::resolve(request.method(), request.uri().path(), &query)?;
        // Who may do this, before anything is read, written or proxied.
        crate::authz::authorize_request(self.authorizer(), &request, &target)?;
        // An aggregated group-version is its server's, even one served here too; so is its
        // OpenAPI v3 document.
        let path = request.uri().path();
        let aggregated = crate::aggregation::proxy::target(self, path).or_else(|| {
            path.strip_prefix("/openapi/v3")
                .and_then(|p| crate::aggregation::proxy::target(self, p))
        });
        if let Some(target) = aggregated {
            return Ok(crate::aggregation::proxy::proxy(self, &target, request).await);
        }
        let accept = request
            .headers()
            .get(http::header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        if let Some(answer) = metrics::serve(self, &target, &query, accept.as_deref()).await {
            return answer;
        }
        match target {
            Target::CoreGroup => Ok(discovery::core_group(self, accept.as_deref())),
            Target::Groups => Ok(discovery::groups(self, accept.as_deref())),
            Target::Group(group) => discovery::group(self, &group),
            Target::GroupVersion { group, version } => {
                discovery::group_version(self, &group, &version)
            }
            Target::Other(path) => self.other(request.method(), &path, accept.as_deref()),
            Target::Resource(r) => self.resource(r, request, query, accept.as_deref()).await,
        }
    }

    fn other(
        &self,
        method: &Method,
        path: &str,
        accept: Option<&str>,
    ) -> Result<Response<Body>, ApiError> {
        if method == Method::GET {
            if let Some(answer) = oidc::serve(self, path) {
                return Ok(answer);
            }
            if path == "/version" {
                return Ok(response::json_bytes(StatusCode::OK, version()));
            }
            if path == "/metrics" {
                if let Some(render) = self.metrics_renderer.get() {
                    return Ok(response::text(
                        StatusCode::OK,
                        METRICS_CONTENT_TYPE,
                        render(),
                    ));
                }
            }
            let aggregated = || crate::aggregation::openapi_paths(self);
            let aggregated_v2 = |own: &Bytes| crate::aggregation::openapi_v2(self, own);
            if let Some(r) = openapi::serve(
                &self.served().openapi,
                path,
                accept,
                aggregated,
                aggregated_v2,
            )? {
                return Ok(r);
            }
        }
        Err(ApiError::no_such_path())
    }

    async fn resource(
        &self,
        r: ResourceRequest,
        mut request: Request<Bytes>,
        query: BTreeMap<String, String>,
        accept: Option<&str>,
    ) -> Result<Response<Body>, ApiError> {
        let store = self.registry_store_of(&r.group, &r.version, &r.resource)?;
        let def = &store.def;
        if r.namespace.is_some() && !def.namespaced {
            return Err(ApiError::no_such_path());
        }
        // exec, attach and portforward need the request's headers and its upgrade handle.
        let connect = pod_stream::is_stream(&r.group, &r.resource, r.subresource.as_deref())
            .then(|| pod_stream::Connect::take(&mut request));
        let asked_by = request.extensions().get::<User>().cloned();
        let user = asked_by.clone().unwrap_or_else(crate::auth::admin_user);
        let ctx = Ctx {
            api: self,
            store: &store,
            def,
            req: &r,
            query: &query,
            accept,
            content_type: request
                .headers()
                .get(http::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("application/json")
                .to_owned(),
            user_agent: request
                .headers()
                .get(http::header::USER_AGENT)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned),
            body: request.into_body(),
        };
        let admission = admission_of(&ctx, asked_by.as_ref());
        if let Some(sub) = &r.subresource {
            if !def.has_subresource(sub) {
                return Err(ApiError::no_such_path());
            }
            if let Some(connect) = connect {
                return pod_stream::connect(&ctx, sub, connect).await;
            }
            return admitted(admission, subresource::handle(&ctx, sub)).await;
        }
        // Across all namespaces kube-apiserver serves a namespaced resource's list and watch
        // only: deleting that collection is not an action there.
        let across_namespaces = def.namespaced && r.namespace.is_none();
        if !def.supports(r.verb.as_str()) || (r.verb == Verb::DeleteCollection && across_namespaces)
        {
            return Err(ApiError::method_not_supported(
                &def.group_resource(),
                r.verb.as_str(),
            ));
        }
        if r.verb == Verb::Create {
            if let Some(e) = def.strategy.refuse_create() {
                return Err(e);
            }
        }
        if def.strategy.reports_components() {
            return component_status::serve(&ctx).await;
        }
        if r.verb == Verb::Create && def.strategy.reviews() {
            return review::create(&ctx, &user).await;
        }
        if r.verb == Verb::Create && def.strategy.binds_pods() {
            return subresource::bind_named(&ctx).await;
        }
        // RBAC writes are checked for escalation where admission sees the final object.
        let escalation = crate::authz::escalation::EscalationCheck::for_write(
            self.authorizer(),
            def,
            asked_by.as_ref(),
            admission
                .clone()
                .map(|a| a as Arc<dyn crate::registry::store::Admit>),
        );
        let response = admitted_checked(admission, escalation, async {
            match r.verb {
                Verb::Get => read::get(&ctx).await,
                Verb::List => read::list(&ctx).await,
                Verb::Watch => watch::watch(&ctx).await,
                Verb::Create => write::create(&ctx).await,
                Verb::Update => update::update(&ctx).await,
                Verb::Patch => update::patch(&ctx).await,
                Verb::Delete => delete::delete(&ctx).await,
                Verb::DeleteCollection => delete::delete_collection(&ctx).await,
            }
        })
        .await;
        // A CRD write changes what is served: apply it before answering, so the new
        // resource is in discovery as soon as the client hears back.
        if def.strategy.defines_resources()
            && !matches!(r.verb, Verb::Get | Verb::List | Verb::Watch)
            && response.is_ok()
        {
            crate::crd::controller::reconcile_after_write(self, r.name.as_deref()).await;
        }
        response
    }
}

/// The admission of a write (`admission/`): for creates, updates, patches and deletes of a
/// resource and writes of its `status` and `scale`; `None` for everything else, and when no
/// webhook or policy binding is configured.
fn admission_of(
    ctx: &Ctx<'_>,
    user: Option<&crate::User>,
) -> Option<Arc<crate::admission::RequestAdmission>> {
    let write = matches!(
        ctx.req.verb,
        Verb::Create | Verb::Update | Verb::Patch | Verb::Delete | Verb::DeleteCollection
    );
    let subresource = ctx.req.subresource.as_deref().unwrap_or_default();
    if !write || !matches!(subresource, "" | "status" | "scale") {
        return None;
    }
    let delete_body = if matches!(ctx.req.verb, Verb::Delete | Verb::DeleteCollection) {
        serde_json::from_slice(&ctx.body).unwrap_or_default()
    } else {
        serde_json::Value::Null
    };
    crate::admission::for_request(
        ctx.api,
        crate::admission::RequestFacts {
            def: ctx.def,
            subresource,
            name: ctx.name(),
            namespace: ctx.req.namespace.as_deref(),
            user,
            query: ctx.query,
            delete_body,
        },
    )
}

/// Runs a handler under `admission` (if any) and adds the warnings of webhooks and policies to
/// its answer, error or not.
async fn admitted(
    admission: Option<Arc<crate::admission::RequestAdmission>>,
    handler: impl std::future::Future<Output = Result<Response<Body>, ApiError>>,
) -> Result<Response<Body>, ApiError> {
    admitted_checked(admission, None, handler).await
}

/// [`admitted`], under `check` (which asks `admission` itself) when given.
async fn admitted_checked(
    admission: Option<Arc<crate::admission::RequestAdmission>>,
    check: Option<Arc<dyn crate::registry::store::Admit>>,
    handler: impl std::future::Future<Output = Result<Response<Body>, ApiError>>,
) -> Result<Response<Body>, ApiError> {
    let Some(admission) = admission else {
        return match check {
            Some(check) => crate::registry::store::admitting(check, handler).await,
            None => handler.await,
        };
    };
    let admit: Arc<dyn crate::registry::store::Admit> = check.unwrap_or_else(|| admission.clone());
    let result = crate::registry::store::admitting(admit, handler).await;
    let warnings = admission.warnings();
    if warnings.is_empty() {
        return result;
    }
    let response = result.unwrap_or_else(|e| response::error(&e));
    Ok(write::with_warnings(response, &warnings))
}

/// Everything a resource handler needs about its request.
pub(crate) struct Ctx<'a> {
    pub(crate) api: &'a Api,
    /// The registry store of the resource.
    pub(crate) store: &'a Arc<RegistryStore>,
    pub(crate) def: &'a Arc<ResourceDef>,
    pub(crate) req: &'a ResourceRequest,
    pub(crate) query: &'a BTreeMap<String, String>,
    pub(crate) accept: Option<&'a str>,
    pub(crate) content_type: String,
    /// The client's `User-Agent`, which names its writes' manager when it names none.
    pub(crate) user_agent: Option<String>,
    pub(crate) body: Bytes,
}

impl Ctx<'_> {
    pub(crate) fn gr(&self) -> GroupResource {
        self.def.group_resource()
    }

    pub(crate) fn name(&self) -> &str {
        self.req.name.as_deref().unwrap_or_default()
    }

    pub(crate) fn dry_run(&self) -> Result<bool, ApiError> {
        crate::registry::store::dry_run_of(self.query)
    }

    /// The field manager of a non-apply write through `scope`, its `fieldManager` checked;
    /// `options` names the request's options kind in the error (`CreateOptions`, …).
    pub(crate) fn field_manager(
        &self,
        scope: crate::registry::store::Scope,
        options: &str,
    ) -> Result<FieldManager<'_>, ApiError> {
        let given = self.query.get("fieldManager").map(String::as_str);
        let causes = given.map(field_manager_causes).unwrap_or_default();
        if !causes.is_empty() {
            return Err(ApiError::invalid(options, "meta.k8s.io", "", causes));
        }
        Ok(FieldManager::new(
            self.def,
            manager_name(given, self.user_agent.as_deref()),
            Operation::Update,
            scope,
        )
        .across(self.other_versions()))
    }

    /// The resource's other served versions (their managers' fields are kept in their terms).
    pub(crate) fn other_versions(&self) -> Vec<Arc<ResourceDef>> {
        let served = self.api.served();
        let all = served
            .registry
            .versions_of(&self.def.gvk.group, &self.def.plural);
        if all.len() < 2 {
            return Vec::new();
        }
        all.iter()
            .filter(|d| d.gvk.version != self.def.gvk.version)
            .cloned()
            .collect()
    }
}

/// The `/version` document, as kube-apiserver writes it: `version.Info`'s fields in order,
/// indented by two spaces, without a trailing newline (it is not written by the API encoder).
pub(crate) fn version() -> Vec<u8> {
    #[derive(serde::Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Info {
        major: &'static str,
        minor: &'static str,
        git_version: String,
        git_commit: &'static str,
        git_tree_state: &'static str,
        build_date: &'static str,
        go_version: &'static str,
        compiler: &'static str,
        platform: String,
    }
    let info = Info {
        major: "1",
        minor: KUBERNETES_MINOR,
        git_version: format!(
            "v1.{KUBERNETES_MINOR}.0-setpoint.{}",
            env!("CARGO_PKG_VERSION")
        ),
        git_commit: "",
        git_tree_state: "clean",
        build_date: "",
        go_version: "",
        compiler: "rustc",
        platform: format!("{}/{}", std::env::consts::OS, std::env::consts::ARCH),
    };
    serde_json::to_vec_pretty(&info).expect("the version document serializes")
}
