//! The PostgreSQL provider: `Database`, `Role` and `Grant` objects
//! (`postgresql.sql.crossplane.io/v1alpha1`, Crossplane provider-sql's kinds and fields)
//! reconciled with a real PostgreSQL server that a cluster-scoped `ProviderConfig` names —
//! pattern 3, API → outside world, written with the SDK's managed-resource loop.
//!
//! [`run`] installs the four CRDs, then runs one [`ManagedReconciler`] per managed kind with
//! one [`PostgresConnector`] (the server and login come from the ProviderConfig and its
//! credentials Secret at every connect; connections are pooled). Each kind's external client
//! is in its own file: `database.rs` ([`DatabaseClient`]), `role.rs` ([`RoleClient`]),
//! `grant.rs` ([`GrantClient`]). Besides their own objects, the Role loop watches Secrets (a
//! changed password Secret changes the role's password at once) and the Grant loop watches
//! Roles and Databases (a grant waiting for its role is retried as soon as the role appears).
//! Everything else — drift put back, a server down reported as `Synced=False` and recovered
//! from — is the loop's periodic observation.
//!
//! [`LocalPostgres`] starts a throwaway server (Debian's binaries, a free loopback port) for
//! the provider's tests and `setpoint bench providers`.

mod connector;
mod database;
mod error;
mod grant;
mod local;
mod resources;
mod role;
mod scram;
mod sql;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::{CustomResourceExt, ResourceExt};
use setpoint_runtime::managed::{changes, external_name, ManagedOptions, ManagedReconciler};
use setpoint_runtime::{
    install_crd, Controller, ControllerError, EventRecorder, ObjectCache, ObjectKey, Reporter,
};
use tokio_util::sync::CancellationToken;

pub use connector::PostgresConnector;
pub use database::DatabaseClient;
pub use error::PostgresError;
pub use grant::GrantClient;
pub use local::{LocalPostgres, LocalPostgresError};
pub use resources::{
    Database, DatabaseObservation, DatabaseParameters, DatabaseSpec, DatabaseStatus, Grant,
    GrantObservation, GrantOption, GrantParameters, GrantSpec, GrantStatus, ManagedStatus,
    ProviderConfig, ProviderConfigSpec, ProviderCredentials, Reference, Role,
    RoleConfigurationParameter, RoleObservation, RoleParameters, RolePrivilege, RoleSpec,
    RoleStatus, SecretKeySelector, SecretRef, CREDENTIALS_SOURCE, GROUP,
};
pub use role::RoleClient;

use crate::ProviderContext;

/// Reconciles of one kind that may run at once (the connection pool holds as many).
const CONCURRENCY: usize = 4;
/// The provider's name in events (as the reporting controller) and its loops' prefix.
const NAME: &str = "provider-postgresql";
/// How long installing a CRD may take.
const CRD_TIMEOUT: Duration = Duration::from_secs(60);

/// Installs the provider's CRDs, then runs its three loops (`postgresql-database`,
/// `postgresql-role`, `postgresql-grant`) until `shutdown` is cancelled.
pub async fn run(ctx: ProviderContext, shutdown: CancellationToken) -> Result<(), ControllerError> {
    for crd in [
        ProviderConfig::crd(),
        Database::crd(),
        Role::crd(),
        Grant::crd(),
    ] {
        if let Err(e) = install_crd(&ctx.client, &crd, CRD_TIMEOUT).await {
            tracing::error!(error = %e, "installing the PostgreSQL provider's CRDs; its loops do not run");
            shutdown.cancelled().await;
            return Ok(());
        }
    }
    let connector = PostgresConnector::new(ctx.client.clone());
    let options = |name: &str| {
        let mut options = ManagedOptions::new(name);
        options.poll_interval = ctx.settings.poll_interval;
        options
    };
    let recorder = EventRecorder::new(ctx.client.clone(), Reporter::new(NAME, NAME));

    let databases = Controller::<Database>::new(&ctx.factory)
        .named("postgresql-database")
        .registered_in(&ctx.metrics)
        .concurrency(CONCURRENCY)
        .predicate(changes())
        .run(
            ManagedReconciler::new(
                ctx.client.clone(),
                connector.clone(),
                options("postgresql-database"),
            )
            .with_events(recorder.clone()),
            Arc::new(()),
            shutdown.clone().cancelled_owned(),
        );

    let role_cache = ctx.factory.informer::<Role>().store();
    let roles = Controller::<Role>::new(&ctx.factory)
        .named("postgresql-role")
        .registered_in(&ctx.metrics)
        .concurrency(CONCURRENCY)
        .predicate(changes())
        .watches(move |secret: &Secret| roles_using(&role_cache, secret))
        .run(
            ManagedReconciler::new(
                ctx.client.clone(),
                connector.clone(),
                options("postgresql-role"),
            )
            .with_events(recorder.clone()),
            Arc::new(()),
            shutdown.clone().cancelled_owned(),
        );

    let grant_cache = ctx.factory.informer::<Grant>().store();
    let grant_cache_2 = grant_cache.clone();
    let grants = Controller::<Grant>::new(&ctx.factory)
        .named("postgresql-grant")
        .registered_in(&ctx.metrics)
        .concurrency(CONCURRENCY)
        .predicate(changes())
        .watches(move |role: &Role| {
            grants_naming(&grant_cache, &role.name_any(), &external_name(role))
        })
        .watches(move |db: &Database| {
            grants_naming(&grant_cache_2, &db.name_any(), &external_name(db))
        })
        .run(
            ManagedReconciler::new(ctx.client.clone(), connector, options("postgresql-grant"))
                .with_events(recorder),
            Arc::new(()),
            shutdown.cancelled_owned(),
        );

    let (a, b, c) = tokio::join!(databases, roles, grants);
    a.and(b).and(c)
}

/// The Roles whose password Secret is `secret`.
fn roles_using(roles: &ObjectCache<Role>, secret: &Secret) -> Vec<ObjectKey> {
    let (namespace, name) = (secret.namespace().unwrap_or_default(), secret.name_any());
    roles
        .list()
        .iter()
        .filter(|role| {
            role.spec
                .for_provider
                .password_secret_ref
                .as_ref()
                .is_some_and(|r| r.namespace == namespace && r.name == name)
        })
        .map(|role| ObjectKey::of(role.as_ref()))
        .collect()
}

/// The Grants naming a Role or Database called `name` (by reference) or `external` (by name).
fn grants_naming(grants: &ObjectCache<Grant>, name: &str, external: &str) -> Vec<ObjectKey> {
    grants
        .list()
        .iter()
        .filter(|grant| {
            let p = &grant.spec.for_provider;
            let by_name = [&p.role, &p.database, &p.member_of]
                .iter()
                .any(|n| n.as_deref() == Some(external));
            let by_ref = [&p.role_ref, &p.database_ref, &p.member_of_ref]
                .iter()
                .any(|r| r.as_ref().is_some_and(|r| r.name == name));
            by_name || by_ref
        })
        .map(|grant| ObjectKey::of(grant.as_ref()))
        .collect()
}
