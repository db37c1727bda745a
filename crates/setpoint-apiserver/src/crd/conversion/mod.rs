//! CRD conversion webhooks (`spec.conversion.strategy: Webhook`), as kube-apiserver's
//! apiextensions-apiserver calls them: a CRD whose versions have different schemas names a
//! webhook (`spec.conversion.webhook.clientConfig`, a URL or a Service, with `caBundle`) that
//! converts objects between versions with a `ConversionReview` v1 ([`review`]).
//!
//! Every served version of such a CRD is a [`Conversion`] (implemented here for
//! [`CustomResource`]): the registry store converts what it reads to the served version (a
//! get, a list page or a batch of watch events in one review; the version's defaults applied
//! after) and what it writes to the storage version (`registry/store/convert.rs`). Objects
//! already in the wanted version are not sent; when none need converting there is no call.
//! A webhook that cannot be reached within [`TIMEOUT`] or answers wrongly fails the request
//! with a 500: `conversion webhook for <group>/<version>, Kind=<kind> failed: …`.

mod review;

use std::sync::{Arc, Weak};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use serde_json::Value;
use setpoint_core::{ApiError, Cause};

use super::CustomResource;
use crate::api::Api;
use crate::registry::store::Conversion;
use crate::webhook::{self, Client, ClientConfig};

/// How long one conversion call may take (kube-apiserver waits 30 s too).
pub(crate) const TIMEOUT: Duration = Duration::from_secs(30);

/// The conversion webhook of one CRD, shared by its versions.
pub(crate) struct Webhook {
    config: ClientConfig,
    /// Connections to the webhook.
    client: Client,
    /// The API, for the Services and endpoints a `service` client config names.
    api: Weak<Api>,
}

impl std::fmt::Debug for Webhook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Webhook")
            .field("endpoint", &self.config.endpoint)
            .finish_non_exhaustive()
    }
}

impl Webhook {
    /// The webhook of a CRD's `spec`, if its conversion strategy is `Webhook`.
    pub(crate) fn of_spec(spec: &Value, api: &Weak<Api>) -> Option<Arc<Webhook>> {
        let conversion = &spec["conversion"];
        if conversion["strategy"] != "Webhook" {
            return None;
        }
        Some(Arc::new(Webhook {
            config: ClientConfig::parse(&conversion["webhook"]["clientConfig"]),
            client: Client::default(),
            api: api.clone(),
        }))
    }

    /// `objects` in `desired` (`<group>/<version>`), in order: those in another version
    /// converted by one call, the others as they are.
    async fn convert(
        &self,
        mut objects: Vec<Value>,
        desired: &str,
    ) -> Result<Vec<Value>, ApiError> {
        let pending: Vec<usize> = (0..objects.len())
            .filter(|&i| objects[i]["apiVersion"].as_str() != Some(desired))
            .collect();
        let Some(&first) = pending.first() else {
            return Ok(objects);
        };
        let gvk = format!(
            "{}, Kind={}",
            objects[first]["apiVersion"].as_str().unwrap_or_default(),
            objects[first]["kind"].as_str().unwrap_or_default()
        );
        let failed = |e: &str| {
            let e = e.strip_prefix("failed to call webhook: ").unwrap_or(e);
            ApiError::internal(format!("conversion webhook for {gvk} failed: {e}"))
        };
        let api = self
            .api
            .upgrade()
            .ok_or_else(|| failed("the server is shutting down"))?;
        let uid = crate::registry::meta::new_uid();
        let converted = {
            let originals: Vec<&Value> = pending.iter().map(|&i| &objects[i]).collect();
            let body = serde_json::to_vec(&review::request(&uid, desired, &originals))
                .map_err(|e| failed(&e.to_string()))?;
            let answer = webhook::call(
                &self.client,
                &api.served(),
                &self.config,
                TIMEOUT,
                Bytes::from(body),
            )
            .await
            .map_err(|e| failed(&e))?;
            review::converted(&answer, &uid, desired, &originals).map_err(|e| failed(&e))?
        };
        for (i, object) in pending.into_iter().zip(converted) {
            objects[i] = object;
        }
        Ok(objects)
    }
}

#[async_trait]
impl Conversion for CustomResource {
    async fn to_served(&self, objects: Vec<Value>) -> Result<Vec<Value>, ApiError> {
        let Some(webhook) = &self.webhook else {
            return Ok(objects);
        };
        let mut objects = webhook.convert(objects, &self.api_version).await?;
        for object in &mut objects {
            self.schema.apply_defaults(object);
        }
        Ok(objects)
    }

    async fn to_storage(&self, objects: Vec<Value>) -> Result<Vec<Value>, ApiError> {
        match &self.webhook {
            None => Ok(objects),
            Some(webhook) => webhook.convert(objects, &self.storage_api_version).await,
        }
    }
}

/// Validates `spec.conversion`: `None` or `Webhook`; a webhook needs a `clientConfig` with
/// exactly one of `url` (https) and `service`, and `conversionReviewVersions` including `v1`.
pub(crate) fn validate(spec: &Value, causes: &mut Vec<Cause>) {
    let conversion = &spec["conversion"];
    let webhook = &conversion["webhook"];
    match conversion["strategy"].as_str() {
        Some("None") | None => {
            if !webhook.is_null() {
                causes.push(Cause::forbidden(
                    "spec.conversion.webhook",
                    "should not be set when strategy is not set to Webhook",
                ));
            }
        }
        Some("Webhook") => {
            let config = &webhook["clientConfig"];
            if config.is_null() {
                causes.push(Cause::required("spec.conversion.webhook.clientConfig"));
            } else {
                match (config["url"].as_str(), config["service"].is_null()) {
                    (Some(_), false) | (None, true) => causes.push(Cause::new(
                        "FieldValueRequired",
                        "spec.conversion.webhook.clientConfig",
                        "exactly one of url or service is required",
                    )),
                    (Some(url), true) if !url.starts_with("https://") => {
                        causes.push(Cause::invalid(
                            "spec.conversion.webhook.clientConfig.url",
                            &config["url"],
                            "'https' is the only allowed URL scheme",
                        ))
                    }
                    _ => {}
                }
            }
            let versions = &webhook["conversionReviewVersions"];
            let has_v1 = versions
                .as_array()
                .is_some_and(|a| a.iter().any(|v| v == "v1"));
            if !has_v1 {
                causes.push(Cause::invalid(
                    "spec.conversion.webhook.conversionReviewVersions",
                    versions,
                    "must include at least one of v1",
                ));
            }
        }
        Some(_) => causes.push(Cause::not_supported(
            "spec.conversion.strategy",
            &conversion["strategy"],
            &["None", "Webhook"],
        )),
    }
}
