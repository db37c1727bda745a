//! Reaching the server a managed object's `ProviderConfig` names (`spec.providerConfigRef`,
//! default `default`): the configuration and its credentials Secret are read at every connect
//! (so a changed password or port is used at once), and connections are kept in a small pool
//! per server and login, [`POOL_SIZE`] of them, reopened when the server closed them (a
//! restart) — so that a reconcile costs queries, not logins.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use parking_lot::Mutex;
use setpoint_runtime::managed::{ConnectionDetails, Managed};
use setpoint_runtime::Client;
use tokio_postgres::config::SslMode;
use tokio_postgres::NoTls;

use super::error::PostgresError;
use super::resources::{ProviderConfig, CREDENTIALS_SOURCE};

/// Connections kept open per server and login.
const POOL_SIZE: usize = 4;
/// How long a connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The ProviderConfig used when an object names none (Crossplane's default).
const DEFAULT_PROVIDER_CONFIG: &str = "default";

/// A server and a login to it, as a ProviderConfig and its Secret describe them.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Server {
    /// Host name or address.
    pub(crate) host: String,
    /// TCP port.
    pub(crate) port: u16,
    /// The provider's login.
    pub(crate) user: String,
    /// Its password.
    pub(crate) password: String,
    /// The database it connects to.
    pub(crate) database: String,
    /// How it uses TLS (never: `Disable` or `Prefer`).
    ssl_mode: Ssl,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Ssl {
    Disable,
    Prefer,
}

impl Server {
    /// `host:port`.
    pub(crate) fn endpoint(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    /// The connection details of `user` with `password` on this server (provider-sql's keys).
    pub(crate) fn details(&self, user: &str, password: Option<&str>) -> ConnectionDetails {
        let mut details = ConnectionDetails::new();
        details.insert("username".to_owned(), user.as_bytes().to_vec());
        details.insert("endpoint".to_owned(), self.host.as_bytes().to_vec());
        details.insert("port".to_owned(), self.port.to_string().into_bytes());
        if let Some(password) = password {
            details.insert("password".to_owned(), password.as_bytes().to_vec());
        }
        details
    }
}

/// A connection to the server an object lives on, for one reconcile.
pub(crate) struct Session {
    /// The server and the provider's login.
    pub(crate) server: Server,
    /// An open connection (shared with other reconciles; queries on it are pipelined).
    pub(crate) db: Arc<tokio_postgres::Client>,
    /// The API client, for Secrets and referenced objects.
    pub(crate) api: Client,
}

/// Opens sessions on servers (a ProviderConfig's server, a pooled connection): the one
/// connector of the provider's three loops.
#[derive(Clone)]
pub struct PostgresConnector {
    api: Client,
    pool: Arc<Pool>,
}

impl PostgresConnector {
    /// A connector reading configurations and Secrets with `api`.
    pub fn new(api: Client) -> PostgresConnector {
        PostgresConnector {
            api,
            pool: Arc::new(Pool::default()),
        }
    }

    /// A session on the server `object`'s ProviderConfig names.
    pub(crate) async fn session<M: Managed>(&self, object: &M) -> Result<Session, PostgresError> {
        let config = object
            .resource_spec()
            .and_then(|s| s.provider_config_ref.as_ref())
            .map_or(DEFAULT_PROVIDER_CONFIG, |r| r.name.as_str());
        let server = server(&self.api, config).await?;
        let db = self.pool.client(&server).await?;
        Ok(Session {
            server,
            db,
            api: self.api.clone(),
        })
    }
}

/// The server and login the ProviderConfig `name` describes.
async fn server(api: &Client, name: &str) -> Result<Server, PostgresError> {
    let config = api
        .api::<ProviderConfig>()
        .get(name)
        .await
        .map_err(|source| PostgresError::Read {
            what: format!("ProviderConfig {name}"),
            source,
        })?;
    let spec = config.spec;
    if spec.credentials.source != CREDENTIALS_SOURCE {
        return Err(PostgresError::Invalid(format!(
            "ProviderConfig {name}: credentials source {:?} is not supported (only {CREDENTIALS_SOURCE})",
            spec.credentials.source
        )));
    }
    let secret_ref = spec.credentials.connection_secret_ref.ok_or_else(|| {
        PostgresError::Invalid(format!(
            "ProviderConfig {name}: spec.credentials.connectionSecretRef is required"
        ))
    })?;
    let data = secret_data(api, &secret_ref.namespace, &secret_ref.name).await?;
    let key = |k: &str| data.get(k).map(|v| String::from_utf8_lossy(v).into_owned());
    let required = |k: &str| {
        key(k).ok_or_else(|| PostgresError::MissingKey {
            secret: format!("{}/{}", secret_ref.namespace, secret_ref.name),
            key: k.to_owned(),
        })
    };
    let host = match spec.host {
        Some(host) => host,
        None => required("endpoint")?,
    };
    let port = match spec.port {
        Some(port) => port,
        None => match key("port") {
            Some(p) => p.trim().parse().map_err(|_| {
                PostgresError::Invalid(format!(
                    "Secret {}/{}: port {p:?} is not a port number",
                    secret_ref.namespace, secret_ref.name
                ))
            })?,
            None => 5432,
        },
    };
    let ssl_mode = match spec.ssl_mode.as_deref().unwrap_or("disable") {
        "disable" | "allow" => Ssl::Disable,
        "prefer" => Ssl::Prefer,
        other => {
            return Err(PostgresError::Invalid(format!(
                "ProviderConfig {name}: sslMode {other:?} is not supported: this provider does not use TLS (use disable)"
            )))
        }
    };
    Ok(Server {
        host,
        port,
        user: required("username")?,
        password: required("password")?,
        database: spec
            .default_database
            .unwrap_or_else(|| "postgres".to_owned()),
        ssl_mode,
    })
}

/// The data of the Secret `namespace/name`.
pub(crate) async fn secret_data(
    api: &Client,
    namespace: &str,
    name: &str,
) -> Result<std::collections::BTreeMap<String, Vec<u8>>, PostgresError> {
    let secret = api
        .namespaced_api::<Secret>(namespace)
        .get(name)
        .await
        .map_err(|source| PostgresError::Read {
            what: format!("Secret {namespace}/{name}"),
            source,
        })?;
    Ok(secret
        .data
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, v.0))
        .collect())
}

/// Open connections by server and slot.
#[derive(Default)]
struct Pool {
    connections: Mutex<HashMap<(Server, usize), Arc<tokio_postgres::Client>>>,
    next: AtomicUsize,
}

impl Pool {
    /// An open connection to `server` (the next slot's; opened if it is not open).
    async fn client(&self, server: &Server) -> Result<Arc<tokio_postgres::Client>, PostgresError> {
        let slot = self.next.fetch_add(1, Ordering::Relaxed) % POOL_SIZE;
        let key = (server.clone(), slot);
        if let Some(client) = self.connections.lock().get(&key) {
            if !client.is_closed() {
                return Ok(client.clone());
            }
        }
        let client = Arc::new(connect(server).await?);
        let mut connections = self.connections.lock();
        // Closed connections, and those of a login whose password changed, are dropped.
        connections.retain(|(s, _), c| !c.is_closed() && !replaced_by(s, server));
        connections.insert(key, client.clone());
        Ok(client)
    }
}

/// Whether `old` is the same login as `new` with another password.
fn replaced_by(old: &Server, new: &Server) -> bool {
    old.host == new.host
        && old.port == new.port
        && old.user == new.user
        && old.database == new.database
        && old.password != new.password
}

/// Opens a connection to `server` and drives it on a task of its own (which ends when the
/// client is dropped or the server closes the connection).
pub(crate) async fn connect(server: &Server) -> Result<tokio_postgres::Client, PostgresError> {
    let mut config = tokio_postgres::Config::new();
    config
        .host(&server.host)
        .port(server.port)
        .user(&server.user)
        .password(&server.password)
        .dbname(&server.database)
        .application_name("setpoint-provider-postgresql")
        .connect_timeout(CONNECT_TIMEOUT)
        .ssl_mode(match server.ssl_mode {
            Ssl::Disable => SslMode::Disable,
            Ssl::Prefer => SslMode::Prefer,
        });
    let (client, connection) =
        config
            .connect(NoTls)
            .await
            .map_err(|source| PostgresError::Connect {
                endpoint: server.endpoint(),
                source,
            })?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::debug!(error = %e, "a PostgreSQL connection ended");
        }
    });
    Ok(client)
}
