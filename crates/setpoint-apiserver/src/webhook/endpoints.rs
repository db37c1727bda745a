//! Where a webhook's requests go: its `clientConfig.url` (a host name is looked up), or its
//! `clientConfig.service`, routed to one of the Service's ready endpoints — from its
//! EndpointSlices (`discovery.k8s.io/v1`) or its Endpoints (`v1`), whichever this server
//! stores — with the certificate checked for `NAME.NAMESPACE.svc`, as kube-apiserver checks
//! it. A Service without a usable endpoint is an error, which the webhook's failure policy
//! then decides on.

use std::net::{IpAddr, SocketAddr};

use serde_json::Value;

use super::Endpoint;
use crate::api::Served;

/// A webhook call's destination.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Destination {
    pub(crate) address: SocketAddr,
    /// What the certificate must be issued for.
    pub(crate) server_name: String,
    /// The `Host` header.
    pub(crate) host: String,
    /// Path (and query) to post to.
    pub(crate) path: String,
    /// The URL as error messages show it.
    pub(crate) url: String,
}

/// Resolves `endpoint`; `timeout_seconds` is added to the path as `?timeout=Ns`, as
/// kube-apiserver tells webhooks how long it waits.
pub(crate) async fn resolve(
    served: &Served,
    endpoint: &Endpoint,
    timeout_seconds: u64,
) -> Result<Destination, String> {
    match endpoint {
        Endpoint::Url(url) => resolve_url(url, timeout_seconds).await,
        Endpoint::Service {
            namespace,
            name,
            path,
            port,
        } => resolve_service(served, namespace, name, path, *port, timeout_seconds).await,
    }
}

fn with_timeout(path: &str, seconds: u64) -> String {
    let path = if path.is_empty() { "/" } else { path };
    format!("{path}?timeout={seconds}s")
}

async fn resolve_url(url: &str, timeout_seconds: u64) -> Result<Destination, String> {
    let uri: http::Uri = url
        .parse()
        .map_err(|e| format!("invalid webhook URL {url:?}: {e}"))?;
    let host = uri
        .host()
        .ok_or_else(|| format!("invalid webhook URL {url:?}: no host"))?;
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let port = uri.port_u16().unwrap_or(443);
    let path = with_timeout(uri.path(), timeout_seconds);
    let shown = format!("{}{path}", url.trim_end_matches(uri.path()));
    let address = match bare.parse::<IpAddr>() {
        Ok(ip) => SocketAddr::new(ip, port),
        Err(_) => tokio::net::lookup_host((bare, port))
            .await
            .map_err(|e| format!("Post {shown:?}: dial tcp: lookup {bare}: {e}"))?
            .next()
            .ok_or_else(|| format!("Post {shown:?}: dial tcp: lookup {bare}: no such host"))?,
    };
    Ok(Destination {
        address,
        server_name: bare.to_owned(),
        host: uri
            .authority()
            .map_or_else(|| host.to_owned(), |a| a.as_str().to_owned()),
        path,
        url: shown,
    })
}

async fn resolve_service(
    served: &Served,
    namespace: &str,
    name: &str,
    path: &str,
    port: u16,
    timeout_seconds: u64,
) -> Result<Destination, String> {
    let server_name = format!("{name}.{namespace}.svc");
    let path = with_timeout(path, timeout_seconds);
    let url = format!("https://{server_name}:{port}{path}");
    let address = service_address(served, namespace, name, port)
        .await
        .map_err(|e| e.to_string())?;
    Ok(Destination {
        address,
        host: format!("{server_name}:{port}"),
        server_name,
        path,
        url,
    })
}

/// Why a Service has no address to call.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ServiceError {
    #[error("services are not served")]
    NotServed,
    #[error("service \"{namespace}/{name}\" not found")]
    NotFound { namespace: String, name: String },
    #[error("service \"{namespace}/{name}\" has no port {port}")]
    NoPort {
        namespace: String,
        name: String,
        port: u16,
    },
    #[error("no endpoints available for service \"{namespace}/{name}\"")]
    NoEndpoints {
        namespace: String,
        name: String,
        /// The name of the Service's port (`""` when unnamed).
        port_name: String,
    },
}

/// One ready endpoint of port `port` of the Service `namespace/name`, picked at random (what
/// webhooks and aggregated API servers are called at).
pub(crate) async fn service_address(
    served: &Served,
    namespace: &str,
    name: &str,
    port: u16,
) -> Result<SocketAddr, ServiceError> {
    let services = served
        .store("", "v1", "services")
        .ok_or(ServiceError::NotServed)?;
    let service =
        services
            .get(Some(namespace), name)
            .await
            .map_err(|_| ServiceError::NotFound {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
            })?;
    let service_port = service["spec"]["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["port"].as_u64() == Some(u64::from(port)))
        .ok_or_else(|| ServiceError::NoPort {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            port,
        })?;
    let port_name = service_port["name"].as_str().unwrap_or_default();
    let candidates = ready_endpoints(served, namespace, name, port_name, service_port).await;
    if candidates.is_empty() {
        return Err(ServiceError::NoEndpoints {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            port_name: port_name.to_owned(),
        });
    }
    Ok(candidates[rand::Rng::gen_range(&mut rand::thread_rng(), 0..candidates.len())])
}

/// The ready addresses of the Service's port named `port_name` (its only port when unnamed):
/// from its EndpointSlices if the server stores them, else from its Endpoints.
async fn ready_endpoints(
    served: &Served,
    namespace: &str,
    name: &str,
    port_name: &str,
    service_port: &Value,
) -> Vec<SocketAddr> {
    // A target port given as a number is where endpoints listen when they name no ports.
    let fallback_port = service_port["targetPort"]
        .as_u64()
        .or_else(|| service_port["port"].as_u64())
        .and_then(|p| u16::try_from(p).ok());
    if let Some(slices) = served.store("discovery.k8s.io", "v1", "endpointslices") {
        let prefix = slices.def.collection_prefix(Some(namespace));
        let (objects, _) = slices.cache().snapshot();
        let mut found = Vec::new();
        for (key, object) in objects.iter() {
            if !key.starts_with(prefix.as_bytes())
                || object
                    .labels
                    .get("kubernetes.io/service-name")
                    .map(String::as_str)
                    != Some(name)
            {
                continue;
            }
            let Ok(slice) = serde_json::from_slice::<Value>(&object.json.bytes()) else {
                continue;
            };
            let Some(port) = port_of(&slice["ports"], port_name).or(fallback_port) else {
                continue;
            };
            for endpoint in slice["endpoints"].as_array().into_iter().flatten() {
                if endpoint["conditions"]["ready"] == Value::Bool(false) {
                    continue;
                }
                found.extend(addresses(&endpoint["addresses"], port));
            }
        }
        if !found.is_empty() {
            return found;
        }
    }
    let Some(endpoints) = served.store("", "v1", "endpoints") else {
        return Vec::new();
    };
    let Ok(object) = endpoints.get(Some(namespace), name).await else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for subset in object["subsets"].as_array().into_iter().flatten() {
        if let Some(port) = port_of(&subset["ports"], port_name).or(fallback_port) {
            found.extend(addresses(&subset["addresses"], port));
        }
    }
    found
}

/// The number of the port named `name` in an endpoints' `ports` (the only one when `name` is
/// empty).
fn port_of(ports: &Value, name: &str) -> Option<u16> {
    let ports = ports.as_array()?;
    let port = if name.is_empty() && ports.len() == 1 {
        ports.first()
    } else {
        ports
            .iter()
            .find(|p| p["name"].as_str().unwrap_or_default() == name)
    }?;
    port["port"].as_u64().and_then(|p| u16::try_from(p).ok())
}

/// Socket addresses of a list of IP addresses (EndpointSlice strings, or Endpoints objects
/// with `ip`).
fn addresses(list: &Value, port: u16) -> Vec<SocketAddr> {
    list.as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a.as_str().or_else(|| a["ip"].as_str()))
        .filter_map(|ip| ip.parse::<IpAddr>().ok())
        .map(|ip| SocketAddr::new(ip, port))
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[tokio::test]
    async fn urls_should_resolve_with_the_timeout_in_the_path() {
        let d = resolve_url("https://127.0.0.1:8443/validate", 10)
            .await
            .unwrap();
        assert_eq!(d.address, "127.0.0.1:8443".parse().unwrap());
        assert_eq!(d.server_name, "127.0.0.1");
        assert_eq!(d.host, "127.0.0.1:8443");
        assert_eq!(d.path, "/validate?timeout=10s");
        assert_eq!(d.url, "https://127.0.0.1:8443/validate?timeout=10s");
        let d = resolve_url("https://[::1]/", 3).await.unwrap();
        assert_eq!(d.address, "[::1]:443".parse().unwrap());
        assert_eq!(d.server_name, "::1");
    }

    #[test]
    fn ports_and_addresses_should_be_read_from_either_kind() {
        let ports = json!([{"name": "https", "port": 9443}, {"name": "metrics", "port": 8080}]);
        assert_eq!(port_of(&ports, "https"), Some(9443));
        assert_eq!(port_of(&json!([{"port": 443}]), ""), Some(443));
        assert_eq!(port_of(&ports, ""), None);
        let slice = addresses(&json!(["10.0.0.1", "bad"]), 9443);
        let endpoints = addresses(&json!([{"ip": "10.0.0.2"}]), 9443);
        assert_eq!(slice, ["10.0.0.1:9443".parse().unwrap()]);
        assert_eq!(endpoints, ["10.0.0.2:9443".parse().unwrap()]);
    }
}
