//! A pod spec's projected volumes as kube-apiserver defaults and validates them where
//! ServiceAccount tokens are concerned: a `projected` volume's `defaultMode` defaults to
//! `0644` (420) and a `serviceAccountToken` source's `expirationSeconds` to one hour; a token
//! source needs a `path` (relative, without `..`) and an `expirationSeconds` between ten
//! minutes and 2^32 seconds, and no two sources of one volume may write the same path.
//!
//! The node agent reads these sources to request the tokens it writes into the volume
//! (`setpoint-agent/src/volumes/token.rs`, docs/design/service-account-tokens.md).

use std::collections::BTreeSet;

use serde_json::{json, Map, Value};
use setpoint_core::Cause;

/// A token source's lifetime when it does not say (kube's `SetDefaults_ServiceAccountTokenProjection`).
pub(crate) const DEFAULT_EXPIRATION_SECONDS: i64 = 3600;
/// The shortest lifetime a token source may ask for: ten minutes.
pub(crate) const MIN_EXPIRATION_SECONDS: i64 = 600;
/// The longest: 2^32 seconds.
const MAX_EXPIRATION_SECONDS: i64 = 1 << 32;
/// The mode of a projected volume's files when it does not say (0644).
const DEFAULT_MODE: i64 = 0o644;

/// Applies the defaults of the pod spec's projected volumes.
pub(crate) fn default_projections(spec: &mut Map<String, Value>) {
    let Some(volumes) = spec.get_mut("volumes").and_then(Value::as_array_mut) else {
        return;
    };
    for projected in volumes
        .iter_mut()
        .filter_map(|v| v.get_mut("projected"))
        .filter_map(Value::as_object_mut)
    {
        if projected.get("defaultMode").is_none_or(Value::is_null) {
            projected.insert("defaultMode".into(), json!(DEFAULT_MODE));
        }
        for source in projected
            .get_mut("sources")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            if let Some(token) = source
                .get_mut("serviceAccountToken")
                .and_then(Value::as_object_mut)
            {
                if token.get("expirationSeconds").is_none_or(Value::is_null) {
                    token.insert(
                        "expirationSeconds".into(),
                        json!(DEFAULT_EXPIRATION_SECONDS),
                    );
                }
            }
        }
    }
}

/// The problems of the pod spec's (at `path`) projected volumes' token sources, and paths
/// written twice by one volume.
pub(crate) fn validate_projections(spec: &Value, path: &str, causes: &mut Vec<Cause>) {
    for (i, volume) in spec["volumes"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        let Some(sources) = volume["projected"]["sources"].as_array() else {
            continue;
        };
        let at = format!("{path}.volumes[{i}].projected");
        let mut written = BTreeSet::new();
        for (j, source) in sources.iter().enumerate() {
            let token = &source["serviceAccountToken"];
            if token.is_object() {
                validate_token(token, &at, &format!("{at}.sources[{j}]"), causes);
            }
            for file in files_of(source) {
                if !written.insert(file.clone()) {
                    causes.push(Cause::invalid(
                        format!("{at}.sources[{j}]"),
                        &json!(file),
                        "conflicting duplicate paths",
                    ));
                }
            }
        }
    }
}

fn validate_token(token: &Value, volume_at: &str, at: &str, causes: &mut Vec<Cause>) {
    let field = format!("{at}.serviceAccountToken.expirationSeconds");
    match token["expirationSeconds"].as_i64() {
        Some(s) if s < MIN_EXPIRATION_SECONDS => causes.push(Cause::invalid(
            field,
            &json!(s),
            "may not specify a duration less than 10 minutes",
        )),
        Some(s) if s > MAX_EXPIRATION_SECONDS => causes.push(Cause::invalid(
            field,
            &json!(s),
            "may not specify a duration larger than 2^32 seconds",
        )),
        _ => {}
    }
    match token["path"].as_str() {
        // kube-apiserver names the volume's `path` here, not the source's.
        None | Some("") => causes.push(Cause::required(format!("{volume_at}.path"))),
        Some(p) => {
            if let Some(why) = local_path_problem(p) {
                causes.push(Cause::invalid(
                    format!("{at}.serviceAccountToken.path"),
                    &json!(p),
                    why,
                ));
            }
        }
    }
}

/// Why `path` may not name a file inside a volume: absolute, or climbing out with `..`.
fn local_path_problem(path: &str) -> Option<&'static str> {
    if path.starts_with('/') {
        return Some("must be a relative path");
    }
    if path.split('/').any(|part| part == "..") {
        return Some("must not contain '..'");
    }
    if path.starts_with("..") {
        return Some("must not start with '..'");
    }
    None
}

/// The files one projected source writes, as far as its spec names them.
fn files_of(source: &Value) -> Vec<String> {
    let mut files = Vec::new();
    if let Some(p) = source["serviceAccountToken"]["path"].as_str() {
        files.push(p.to_owned());
    }
    for kind in ["configMap", "secret", "downwardAPI"] {
        for item in source[kind]["items"].as_array().into_iter().flatten() {
            if let Some(p) = item["path"].as_str() {
                files.push(p.to_owned());
            }
        }
    }
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(sources: Value) -> Value {
        json!({"volumes": [{"name": "v", "projected": {"sources": sources}}]})
    }

    fn messages(spec: &Value) -> Vec<String> {
        let mut causes = Vec::new();
        validate_projections(spec, "spec", &mut causes);
        causes.into_iter().map(|c| c.message).collect()
    }

    #[test]
    fn token_sources_should_default_to_an_hour_and_the_volume_to_0644() {
        let mut s = spec(json!([{"serviceAccountToken": {"path": "token"}}]));
        default_projections(s.as_object_mut().expect("object"));
        let projected = &s["volumes"][0]["projected"];
        assert_eq!(projected["defaultMode"], 420);
        assert_eq!(
            projected["sources"][0]["serviceAccountToken"]["expirationSeconds"],
            3600
        );
        let mut own =
            spec(json!([{"serviceAccountToken": {"path": "t", "expirationSeconds": 7200}}]));
        own["volumes"][0]["projected"]["defaultMode"] = json!(0o400);
        default_projections(own.as_object_mut().expect("object"));
        assert_eq!(own["volumes"][0]["projected"]["defaultMode"], 0o400);
        assert_eq!(
            own["volumes"][0]["projected"]["sources"][0]["serviceAccountToken"]
                ["expirationSeconds"],
            7200
        );
    }

    #[test]
    fn token_sources_should_need_a_relative_path_and_at_least_ten_minutes() {
        let ok =
            spec(json!([{"serviceAccountToken": {"path": "token", "expirationSeconds": 600}}]));
        assert!(messages(&ok).is_empty());
        let short = spec(json!([{"serviceAccountToken": {"path": "t", "expirationSeconds": 599}}]));
        assert_eq!(
            messages(&short),
            vec!["spec.volumes[0].projected.sources[0].serviceAccountToken.expirationSeconds: Invalid value: 599: may not specify a duration less than 10 minutes"]
        );
        let long = spec(
            json!([{"serviceAccountToken": {"path": "t", "expirationSeconds": 5_000_000_000_i64}}]),
        );
        assert!(messages(&long)[0].ends_with("may not specify a duration larger than 2^32 seconds"));
        let no_path = spec(json!([{"serviceAccountToken": {"expirationSeconds": 3600}}]));
        assert_eq!(
            messages(&no_path),
            vec!["spec.volumes[0].projected.path: Required value"]
        );
        let escape = spec(json!([{"serviceAccountToken": {"path": "../t"}}]));
        assert!(messages(&escape)[0].ends_with("must not contain '..'"));
        let absolute = spec(json!([{"serviceAccountToken": {"path": "/t"}}]));
        assert!(messages(&absolute)[0].ends_with("must be a relative path"));
    }

    #[test]
    fn two_sources_writing_one_path_should_conflict() {
        let twice = spec(json!([
            {"serviceAccountToken": {"path": "token", "expirationSeconds": 3600}},
            {"configMap": {"name": "c", "items": [{"key": "k", "path": "token"}]}}
        ]));
        assert_eq!(
            messages(&twice),
            vec!["spec.volumes[0].projected.sources[1]: Invalid value: \"token\": conflicting duplicate paths"]
        );
    }
}
