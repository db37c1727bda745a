//! The PostgreSQL provider's kinds, `postgresql.sql.crossplane.io/v1alpha1`, all
//! cluster-scoped, with the field names of Crossplane's provider-sql so that its manifests read
//! the same here: `ProviderConfig` (which server, which credentials), and the managed kinds
//! `Database`, `Role` and `Grant` (`spec.forProvider`, `status.atProvider`,
//! `status.conditions`, and Crossplane's common spec fields flattened into each spec).
//!
//! Setpoint's differences: `ProviderConfig.spec.host` / `spec.port` may override the
//! credentials Secret's `endpoint` / `port`; `sslMode` defaults to `disable` (this provider
//! speaks plain TCP, meant for a server on the same machine or a trusted network) and
//! `disable` / `allow` / `prefer` are the modes it accepts; a Grant is either a role
//! membership (`memberOf`) or privileges on a database (`database`) — provider-sql's schema,
//! table, sequence, routine and foreign-object grants are not supported.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use setpoint_runtime::managed::{Managed, ResourceSpec};

/// The API group of the provider's kinds.
pub const GROUP: &str = "postgresql.sql.crossplane.io";

/// Which PostgreSQL server the managed objects naming this configuration live on, and how to
/// log in to it.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "postgresql.sql.crossplane.io",
    version = "v1alpha1",
    kind = "ProviderConfig",
    plural = "providerconfigs",
    category = "crossplane",
    category = "provider",
    category = "sql",
    printcolumn = r#"{"name":"AGE","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"SECRET-NAME","type":"string","jsonPath":".spec.credentials.connectionSecretRef.name","priority":1}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ProviderConfigSpec {
    /// How to log in.
    pub credentials: ProviderCredentials,
    /// The database the provider connects to (default `postgres`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_database: Option<String>,
    /// `disable` (the default), `allow` or `prefer`: the provider does not use TLS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssl_mode: Option<String>,
    /// The server's host, overriding the Secret's `endpoint` (Setpoint's addition).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// The server's port, overriding the Secret's `port` (Setpoint's addition).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
}

/// Where the credentials come from.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProviderCredentials {
    /// `PostgreSQLConnectionSecret`: a Secret with the keys `endpoint`, `port`, `username`
    /// and `password`.
    pub source: String,
    /// That Secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_secret_ref: Option<SecretRef>,
}

/// The credentials source provider-sql and this provider understand.
pub const CREDENTIALS_SOURCE: &str = "PostgreSQLConnectionSecret";

/// A Secret by namespace and name.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct SecretRef {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

/// One key of a Secret.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct SecretKeySelector {
    /// The Secret's namespace.
    pub namespace: String,
    /// The Secret's name.
    pub name: String,
    /// The key.
    pub key: String,
}

/// A reference to another managed object of this provider, by name.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct Reference {
    /// Its name.
    pub name: String,
}

/// The status every managed kind here has: Crossplane's conditions, and what was observed.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ManagedStatus<A> {
    /// `Ready` and `Synced` (Crossplane's), and any others.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The generation the conditions describe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// What the provider observed on the server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_provider: Option<A>,
}

/// A database.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "postgresql.sql.crossplane.io",
    version = "v1alpha1",
    kind = "Database",
    plural = "databases",
    status = "DatabaseStatus",
    category = "crossplane",
    category = "managed",
    category = "sql",
    printcolumn = r#"{"name":"READY","type":"string","jsonPath":".status.conditions[?(@.type=='Ready')].status"}"#,
    printcolumn = r#"{"name":"SYNCED","type":"string","jsonPath":".status.conditions[?(@.type=='Synced')].status"}"#,
    printcolumn = r#"{"name":"AGE","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct DatabaseSpec {
    /// Crossplane's common fields (`deletionPolicy`, `providerConfigRef`, …).
    #[serde(flatten)]
    pub resource: ResourceSpec,
    /// The database's settings.
    pub for_provider: DatabaseParameters,
}

/// A database's settings; unset ones are filled in from the server's defaults once it exists.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DatabaseParameters {
    /// The owning role.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// The template it is created from (`template1` by default; used at creation only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<String>,
    /// Character set encoding (fixed at creation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encoding: Option<String>,
    /// Collation order, `LC_COLLATE` (fixed at creation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lc_collate: Option<String>,
    /// Character classification, `LC_CTYPE` (fixed at creation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lc_c_type: Option<String>,
    /// Its tablespace (fixed at creation here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tablespace: Option<String>,
    /// Whether anyone may connect (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_connections: Option<bool>,
    /// Concurrent connections allowed; -1 (the default) is no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = -1))]
    pub connection_limit: Option<i32>,
    /// Whether any role with CREATEDB may clone it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_template: Option<bool>,
}

/// A Database's status (provider-sql observes nothing beyond the conditions).
pub type DatabaseStatus = ManagedStatus<DatabaseObservation>;

/// What a Database looked like on the server.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DatabaseObservation {
    /// Its owner.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// Its connection limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_limit: Option<i32>,
}

/// A role (a user when it may log in).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "postgresql.sql.crossplane.io",
    version = "v1alpha1",
    kind = "Role",
    plural = "roles",
    status = "RoleStatus",
    category = "crossplane",
    category = "managed",
    category = "sql",
    printcolumn = r#"{"name":"READY","type":"string","jsonPath":".status.conditions[?(@.type=='Ready')].status"}"#,
    printcolumn = r#"{"name":"SYNCED","type":"string","jsonPath":".status.conditions[?(@.type=='Synced')].status"}"#,
    printcolumn = r#"{"name":"CONN LIMIT","type":"integer","jsonPath":".spec.forProvider.connectionLimit"}"#,
    printcolumn = r#"{"name":"PRIVILEGES","type":"string","jsonPath":".status.atProvider.privilegesAsClauses"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct RoleSpec {
    /// Crossplane's common fields; `writeConnectionSecretToRef` receives `username`,
    /// `password`, `endpoint` and `port`.
    #[serde(flatten)]
    pub resource: ResourceSpec,
    /// The role's settings.
    #[serde(default)]
    pub for_provider: RoleParameters,
}

/// A role's settings.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RoleParameters {
    /// Concurrent connections allowed; -1 is no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = -1))]
    pub connection_limit: Option<i32>,
    /// Its privileges; unset ones are filled in from the server's defaults.
    #[serde(default)]
    pub privileges: RolePrivilege,
    /// The Secret key holding its password; without one a password is generated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password_secret_ref: Option<SecretKeySelector>,
    /// Run-time settings for the role (`ALTER ROLE … SET name = value`); when given, any
    /// others set on the role are reset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub configuration_parameters: Option<Vec<RoleConfigurationParameter>>,
}

/// A role's privileges (each `None`: the server's default, written back once observed).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolePrivilege {
    /// SUPERUSER.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub super_user: Option<bool>,
    /// CREATEDB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub create_db: Option<bool>,
    /// CREATEROLE.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub create_role: Option<bool>,
    /// LOGIN.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub login: Option<bool>,
    /// INHERIT.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inherit: Option<bool>,
    /// REPLICATION.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replication: Option<bool>,
    /// BYPASSRLS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bypass_rls: Option<bool>,
}

/// One run-time setting of a role.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct RoleConfigurationParameter {
    /// The setting's name (`search_path`, `statement_timeout`, …).
    pub name: String,
    /// Its value.
    pub value: String,
}

/// A Role's status.
pub type RoleStatus = ManagedStatus<RoleObservation>;

/// What a Role looked like on the server.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RoleObservation {
    /// Its privileges, as the clauses of `CREATE ROLE` (`LOGIN`, `NOSUPERUSER`, …).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub privileges_as_clauses: Vec<String>,
    /// Its run-time settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub configuration_parameters: Option<Vec<RoleConfigurationParameter>>,
}

/// Privileges on a database for a role, or a role's membership in another.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "postgresql.sql.crossplane.io",
    version = "v1alpha1",
    kind = "Grant",
    plural = "grants",
    status = "GrantStatus",
    category = "crossplane",
    category = "managed",
    category = "sql",
    printcolumn = r#"{"name":"READY","type":"string","jsonPath":".status.conditions[?(@.type=='Ready')].status"}"#,
    printcolumn = r#"{"name":"SYNCED","type":"string","jsonPath":".status.conditions[?(@.type=='Synced')].status"}"#,
    printcolumn = r#"{"name":"AGE","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"ROLE","type":"string","jsonPath":".spec.forProvider.role"}"#,
    printcolumn = r#"{"name":"MEMBER OF","type":"string","jsonPath":".spec.forProvider.memberOf"}"#,
    printcolumn = r#"{"name":"DATABASE","type":"string","jsonPath":".spec.forProvider.database"}"#,
    printcolumn = r#"{"name":"PRIVILEGES","type":"string","jsonPath":".spec.forProvider.privileges"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct GrantSpec {
    /// Crossplane's common fields.
    #[serde(flatten)]
    pub resource: ResourceSpec,
    /// What is granted to whom.
    pub for_provider: GrantParameters,
}

/// What is granted to whom: `privileges` on `database`, or membership in `memberOf`, to
/// `role`. Each of role, database and memberOf is given by name or by a reference to its
/// managed object (whose external name is used).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GrantParameters {
    /// Database privileges (`CONNECT`, `CREATE`, `TEMPORARY`, `ALL`); none for a membership.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub privileges: Vec<String>,
    /// `GRANT` (privileges WITH GRANT OPTION) or `ADMIN` (membership WITH ADMIN OPTION).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub with_option: Option<GrantOption>,
    /// The role granted to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// The Role object granted to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role_ref: Option<Reference>,
    /// The database the privileges are on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub database: Option<String>,
    /// The Database object the privileges are on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub database_ref: Option<Reference>,
    /// The role `role` becomes a member of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub member_of: Option<String>,
    /// The Role object `role` becomes a member of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub member_of_ref: Option<Reference>,
}

/// The option a grant carries.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum GrantOption {
    /// WITH ADMIN OPTION (memberships).
    #[serde(rename = "ADMIN")]
    Admin,
    /// WITH GRANT OPTION (privileges).
    #[serde(rename = "GRANT")]
    Grant,
}

/// A Grant's status (conditions only).
pub type GrantStatus = ManagedStatus<GrantObservation>;

/// What a Grant looked like on the server.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GrantObservation {
    /// The privileges the role holds on the database.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub privileges: Vec<String>,
}

macro_rules! managed {
    ($kind:ty) => {
        impl Managed for $kind {
            fn resource_spec(&self) -> Option<&ResourceSpec> {
                Some(&self.spec.resource)
            }

            fn conditions(&self) -> Vec<Condition> {
                self.status
                    .as_ref()
                    .map(|s| s.conditions.clone())
                    .unwrap_or_default()
            }
        }
    };
}

managed!(Database);
managed!(Role);
managed!(Grant);
