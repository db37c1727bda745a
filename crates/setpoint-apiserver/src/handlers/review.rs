//! POST of a create-only review kind (`SelfSubjectAccessReview`, `SelfSubjectReview`, …): the
//! body is decoded and validated like any create, then the kind's strategy answers it for the
//! user who asked (`registry/kinds/review.rs`; a TokenReview with the server's token
//! authenticator, `registry/kinds/token_review.rs`; the access reviews by the authorizer chain,
//! `authz/review.rs`); nothing is stored. A request without a user
//! (in-process callers) asks as the admin.

use http::{Response, StatusCode};
use setpoint_core::ApiError;

use super::read::respond_object;
use super::response::Body;
use super::write::{decode_body, field_validation, typed, with_warnings};
use super::Ctx;
use crate::auth::User;
use crate::registry::Asker;

/// Answers the review in the body as `user`.
pub(crate) async fn create(ctx: &Ctx<'_>, user: &User) -> Result<Response<Body>, ApiError> {
    if ctx.req.name.is_some() {
        return Err(ApiError::method_not_supported(&ctx.gr(), "create"));
    }
    let (object, warnings) = typed(ctx.def, decode_body(ctx)?, field_validation(ctx)?)?;
    let causes = ctx.def.strategy.validate(&object, None).await;
    if !causes.is_empty() {
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        return Err(ApiError::invalid(
            &ctx.def.gvk.kind,
            &ctx.def.gvk.group,
            name,
            causes,
        ));
    }
    let asker = Asker {
        name: user.name.clone(),
        groups: user.groups.clone(),
        uid: user.uid.clone(),
        extra: user.extra.clone(),
        tokens: ctx.api.authenticator().cloned(),
    };
    let namespace = ctx.req.namespace.as_deref();
    // The access reviews are answered by the authorizer (`authz/review.rs`).
    let access = crate::authz::review::answer(
        ctx.api.authorizer(),
        &ctx.def.gvk.kind,
        &object,
        user,
        namespace,
    )
    .transpose()?;
    let mut answer = ctx.def.strategy.review(object, &asker, namespace)?;
    if let Some(status) = access {
        answer["status"] = status;
    }
    Ok(with_warnings(
        respond_object(ctx.def, &answer, ctx.accept, StatusCode::CREATED),
        &warnings,
    ))
}
