//! The PostgreSQL provider against an in-process API server and a real PostgreSQL server
//! (Debian's binaries, started by the test on a free loopback port: `postgres::LocalPostgres`).
//!
//! - `external_clients_*`: the provider's connector and external clients on their own — create,
//!   observe, drift, update, delete, a server down and back — without the managed loop.
//! - `provider_*`: the provider's loops (`setpoint_providers::postgres::run`, poll interval 1 s)
//!   end to end: a Database created with options and late-initialised; drift made behind the
//!   loop's back (`ALTER DATABASE … CONNECTION LIMIT`, `DROP ROLE`, `ALTER ROLE … PASSWORD`,
//!   `REVOKE`) put back; a Role
//!   whose password Secret changes (the new password logs in, the old one no longer does) and
//!   whose connection Secret holds working credentials, and one with a generated password; a
//!   Grant on a database and a membership; the server
//!   stopped (`Synced=False` with the error) and started again (`Synced=True`); both deletion
//!   policies. One server and one API server for the whole scenario.
//!
//! Real time, polling with generous deadlines; nothing asserts how long anything took.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::ByteString;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::CustomResourceExt;
use serde_json::json;
use setpoint_providers::postgres::{
    Database, Grant, LocalPostgres as Postgres, ProviderConfig, Role,
};
use setpoint_providers::{ProviderContext, ProviderSettings};
use setpoint_runtime::managed::{Connector, ExternalClient, Managed};
use setpoint_runtime::{install_crd, Client, Clock, ControllerError, InformerFactory, Metrics};
use setpoint_testenv::{eventually, Running, TestEnv};

const NS: &str = "default";

fn start_postgres() -> Postgres {
    Postgres::start().unwrap_or_else(|e| panic!("starting PostgreSQL: {e}"))
}

/// The credentials Secret and the ProviderConfig `default` naming `pg`.
async fn configure(client: &Client, pg: &Postgres) {
    let mut data = BTreeMap::new();
    for (k, v) in [
        ("endpoint", pg.host().to_owned()),
        ("port", pg.port().to_string()),
        ("username", pg.user().to_owned()),
        ("password", pg.password().to_owned()),
    ] {
        data.insert(k.to_owned(), ByteString(v.into_bytes()));
    }
    let secret = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some("pg-admin".to_owned()),
            namespace: Some(NS.to_owned()),
            ..Default::default()
        },
        data: Some(data),
        ..Default::default()
    };
    client
        .namespaced_api::<Secret>(NS)
        .create(&PostParams::default(), &secret)
        .await
        .expect("credentials Secret");
    let config: ProviderConfig = serde_json::from_value(json!({
        "apiVersion": "postgresql.sql.crossplane.io/v1alpha1", "kind": "ProviderConfig",
        "metadata": {"name": "default"},
        "spec": {"credentials": {"source": "PostgreSQLConnectionSecret",
            "connectionSecretRef": {"namespace": NS, "name": "pg-admin"}},
            "sslMode": "disable"}
    }))
    .expect("ProviderConfig");
    eventually("the ProviderConfig is created", || async {
        client
            .api::<ProviderConfig>()
            .create(&PostParams::default(), &config)
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    })
    .await;
}

fn sql(pg: &Postgres, statement: &str) -> String {
    pg.psql("postgres", statement)
        .unwrap_or_else(|e| panic!("{statement}: {e}"))
}

/// Logs in as `user` with `password` to `database` and runs a query.
async fn login(pg: &Postgres, user: &str, password: &str, database: &str) -> Result<(), String> {
    let (client, connection) =
        tokio_postgres::connect(&pg.url(user, password, database), tokio_postgres::NoTls)
            .await
            .map_err(|e| e.to_string())?;
    let task = tokio::spawn(connection);
    let result = client.simple_query("SELECT 1").await.map(|_| ());
    drop(client);
    let _ = task.await;
    result.map_err(|e| e.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn external_clients_should_create_observe_put_back_and_delete() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    install_crd(&client, &ProviderConfig::crd(), Duration::from_secs(30))
        .await
        .expect("CRD");
    let mut pg = start_postgres();
    configure(&client, &pg).await;
    let connector = setpoint_providers::postgres::PostgresConnector::new(client.clone());

    let db: Database = serde_json::from_value(json!({
        "apiVersion": "postgresql.sql.crossplane.io/v1alpha1", "kind": "Database",
        "metadata": {"name": "direct"},
        "spec": {"forProvider": {"connectionLimit": 5, "encoding": "UTF8", "template": "template0"}}
    }))
    .expect("Database");
    let external = Connector::<Database>::connect(&connector, &db)
        .await
        .expect("connect");
    let seen = external.observe(&db).await.expect("observe");
    assert!(!seen.exists, "the database exists before it was created");
    external.create(&db).await.expect("create");
    let seen = external.observe(&db).await.expect("observe");
    assert!(seen.exists && seen.up_to_date, "{seen:?}");
    let late = seen
        .late_initialized
        .expect("server defaults to write back");
    assert_eq!(late["spec"]["forProvider"]["owner"], "postgres");
    assert!(late["spec"]["forProvider"].get("connectionLimit").is_none());

    sql(&pg, "ALTER DATABASE direct CONNECTION LIMIT 9");
    let seen = external.observe(&db).await.expect("observe");
    assert!(!seen.up_to_date, "drift not seen: {seen:?}");
    assert!(seen
        .diff
        .unwrap_or_default()
        .contains("connection limit is 9"));
    external.update(&db).await.expect("update");
    assert_eq!(
        sql(
            &pg,
            "SELECT datconnlimit FROM pg_database WHERE datname = 'direct'"
        ),
        "5"
    );

    // A name that needs quoting.
    let odd: Database = serde_json::from_value(json!({
        "apiVersion": "postgresql.sql.crossplane.io/v1alpha1", "kind": "Database",
        "metadata": {"name": "odd", "annotations": {"crossplane.io/external-name": "Odd \"name\"; --"}},
        "spec": {"forProvider": {}}
    }))
    .expect("Database");
    external
        .create(&odd)
        .await
        .expect("create a database with an odd name");
    assert!(external.observe(&odd).await.expect("observe").exists);
    external.delete(&odd).await.expect("delete");
    assert!(!external.observe(&odd).await.expect("observe").exists);

    // The server stopped: connecting fails with the reason; started again: it works.
    tokio::task::block_in_place(|| pg.stop()).expect("stop PostgreSQL");
    let error = match Connector::<Database>::connect(&connector, &db).await {
        Ok(external) => external
            .observe(&db)
            .await
            .expect_err("observed a stopped server"),
        Err(e) => e,
    };
    assert!(
        format!("{error}").contains("PostgreSQL"),
        "unexpected error: {error}"
    );
    tokio::task::block_in_place(|| pg.start_again()).expect("start PostgreSQL");
    let external = eventually("the provider reconnects", || async {
        Connector::<Database>::connect(&connector, &db).await.ok()
    })
    .await;
    let seen = eventually("the database is observed again", || async {
        external.observe(&db).await.ok()
    })
    .await;
    assert!(seen.exists && seen.up_to_date);
    external.delete(&db).await.expect("delete");
    assert!(!external.observe(&db).await.expect("observe").exists);
}

/// The provider's loops over a fresh API server and PostgreSQL.
struct Harness {
    _env: TestEnv,
    client: Client,
    pg: Postgres,
    running: Running<ControllerError>,
}

impl Harness {
    async fn start() -> Harness {
        let env = TestEnv::start().await.expect("test env");
        let client = env.client();
        let pg = start_postgres();
        let ctx = ProviderContext {
            client: client.clone(),
            factory: InformerFactory::new(client.clone()),
            metrics: Metrics::new(),
            clock: Clock::real(),
            settings: ProviderSettings {
                poll_interval: Duration::from_secs(1),
                ..ProviderSettings::default()
            },
        };
        let running = Running::spawn(move |token| setpoint_providers::postgres::run(ctx, token));
        configure(&client, &pg).await;
        Harness {
            _env: env,
            client,
            pg,
            running,
        }
    }

    async fn apply<K: Managed + kube::Resource<Scope = k8s_openapi::ClusterResourceScope>>(
        &self,
        object: serde_json::Value,
    ) {
        let object: K = serde_json::from_value(object).expect("object");
        eventually("the object is created", || async {
            self.client
                .api::<K>()
                .create(&PostParams::default(), &object)
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
        })
        .await;
    }

    /// Waits until `name`'s condition `type_` has `status`; returns its message.
    async fn condition<K: Managed + kube::Resource<Scope = k8s_openapi::ClusterResourceScope>>(
        &self,
        name: &str,
        type_: &str,
        status: &str,
    ) -> String {
        eventually(&format!("{name}: {type_}={status}"), || async {
            let object = self
                .client
                .api::<K>()
                .get(name)
                .await
                .map_err(|e| e.to_string())?;
            let conditions = object.conditions();
            let found = conditions.iter().find(|c| c.type_ == type_);
            match found {
                Some(c) if c.status == status => Ok(c.message.clone()),
                other => Err(format!("{other:?}")),
            }
        })
        .await
    }

    fn sql(&self, statement: &str) -> String {
        tokio::task::block_in_place(|| sql(&self.pg, statement))
    }

    async fn until_sql(&self, what: &str, statement: &str, wanted: &str) {
        eventually(what, || async {
            let got = tokio::task::block_in_place(|| self.pg.psql("postgres", statement))
                .map_err(|e| e.to_string())?;
            if got == wanted {
                Ok(())
            } else {
                Err(format!("{statement} = {got:?}"))
            }
        })
        .await;
    }

    async fn put_secret(&self, name: &str, key: &str, value: &str) {
        let secret = json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": name, "namespace": NS},
            "stringData": {key: value}});
        self.client
            .namespaced_api::<Secret>(NS)
            .patch(
                name,
                &PatchParams::apply("test").force(),
                &Patch::Apply(secret),
            )
            .await
            .expect("Secret");
    }

    async fn secret(&self, name: &str) -> BTreeMap<String, String> {
        let secret = self
            .client
            .namespaced_api::<Secret>(NS)
            .get(name)
            .await
            .expect("Secret");
        secret
            .data
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k, String::from_utf8_lossy(&v.0).into_owned()))
            .collect()
    }
}

fn database(name: &str, policy: &str, for_provider: serde_json::Value) -> serde_json::Value {
    json!({
        "apiVersion": "postgresql.sql.crossplane.io/v1alpha1", "kind": "Database",
        "metadata": {"name": name},
        "spec": {"deletionPolicy": policy, "forProvider": for_provider}
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provider_should_reconcile_databases_roles_and_grants_with_a_real_server() {
    let mut h = Harness::start().await;
    let databases = h.client.api::<Database>();

    // Create with options; the server's defaults are written back into the spec.
    h.apply::<Database>(database(
        "app",
        "Delete",
        json!({"connectionLimit": 5, "encoding": "UTF8", "lcCollate": "C", "lcCType": "C",
               "template": "template0", "allowConnections": true, "isTemplate": false}),
    ))
    .await;
    h.apply::<Database>(database("kept", "Orphan", json!({})))
        .await;
    h.apply::<Database>(database("dropped", "Delete", json!({})))
        .await;
    for name in ["app", "kept", "dropped"] {
        h.condition::<Database>(name, "Ready", "True").await;
        h.condition::<Database>(name, "Synced", "True").await;
    }
    assert_eq!(
        h.sql("SELECT datconnlimit, pg_encoding_to_char(encoding), datcollate, datallowconn FROM pg_database WHERE datname = 'app'"),
        "5|UTF8|C|t"
    );
    eventually("the server's defaults are written back", || async {
        let db = databases.get("kept").await.ok()?;
        let p = db.spec.for_provider;
        (p.owner.as_deref() == Some("postgres") && p.connection_limit == Some(-1)).then_some(())
    })
    .await;

    // Drift behind the loop's back is put back at the next observation.
    h.sql("ALTER DATABASE app CONNECTION LIMIT 42");
    h.until_sql(
        "the connection limit is put back",
        "SELECT datconnlimit FROM pg_database WHERE datname = 'app'",
        "5",
    )
    .await;

    // A Role with a password from a Secret, its connection details in another.
    h.put_secret("app-user-password", "password", "first").await;
    h.apply::<Role>(json!({
        "apiVersion": "postgresql.sql.crossplane.io/v1alpha1", "kind": "Role",
        "metadata": {"name": "app-user"},
        "spec": {
            "forProvider": {"privileges": {"login": true}, "connectionLimit": 10,
                "configurationParameters": [{"name": "statement_timeout", "value": "5s"}],
                "passwordSecretRef": {"namespace": NS, "name": "app-user-password", "key": "password"}},
            "writeConnectionSecretToRef": {"namespace": NS, "name": "app-user-conn"}
        }
    }))
    .await;
    h.condition::<Role>("app-user", "Ready", "True").await;
    assert_eq!(
        h.sql("SELECT rolconfig FROM pg_roles WHERE rolname = 'app-user'"),
        "{statement_timeout=5s}"
    );
    eventually("the connection Secret is written", || async {
        let s = h
            .client
            .namespaced_api::<Secret>(NS)
            .get_opt("app-user-conn")
            .await
            .ok()??;
        s.data?.get("password").map(|_| ())
    })
    .await;
    let details = h.secret("app-user-conn").await;
    assert_eq!(
        details.get("username").map(String::as_str),
        Some("app-user")
    );
    assert_eq!(details.get("password").map(String::as_str), Some("first"));
    let port: u16 = details["port"].parse().expect("port");
    assert_eq!(
        (details["endpoint"].as_str(), port),
        (h.pg.host(), h.pg.port())
    );
    login(&h.pg, &details["username"], &details["password"], "app")
        .await
        .expect("the connection Secret's credentials log in");

    // A role dropped behind the loop's back is created again.
    h.sql("DROP ROLE \"app-user\"");
    h.until_sql(
        "the dropped role is created again",
        "SELECT rolconnlimit FROM pg_roles WHERE rolname = 'app-user'",
        "10",
    )
    .await;

    // The password Secret changes: the new password logs in, the old one no longer does.
    h.put_secret("app-user-password", "password", "second")
        .await;
    eventually("the new password logs in", || async {
        login(&h.pg, "app-user", "second", "app").await
    })
    .await;
    let old = login(&h.pg, "app-user", "first", "app").await;
    assert!(old.is_err(), "the old password still logs in");
    // A password changed behind the loop's back is put back.
    h.sql("ALTER ROLE \"app-user\" PASSWORD 'changed-by-hand'");
    eventually("the password is put back", || async {
        login(&h.pg, "app-user", "second", "app").await
    })
    .await;
    assert!(login(&h.pg, "app-user", "changed-by-hand", "app")
        .await
        .is_err());
    eventually("the connection Secret has the new password", || async {
        (h.secret("app-user-conn")
            .await
            .get("password")
            .map(String::as_str)
            == Some("second"))
        .then_some(())
    })
    .await;

    // A Role without a password Secret gets a generated password, in its connection Secret.
    h.apply::<Role>(json!({
        "apiVersion": "postgresql.sql.crossplane.io/v1alpha1", "kind": "Role",
        "metadata": {"name": "generated"},
        "spec": {"forProvider": {"privileges": {"login": true}},
            "writeConnectionSecretToRef": {"namespace": NS, "name": "generated-conn"}}
    }))
    .await;
    let generated = eventually("the generated password is published", || async {
        let s = h
            .client
            .namespaced_api::<Secret>(NS)
            .get_opt("generated-conn")
            .await
            .ok()??;
        let password = s.data?.get("password")?.0.clone();
        Some(String::from_utf8_lossy(&password).into_owned())
    })
    .await;
    assert_eq!(generated.len(), 32, "{generated:?}");
    login(&h.pg, "generated", &generated, "postgres")
        .await
        .expect("the generated password logs in");

    // A membership: app-user becomes a member of a group role.
    h.apply::<Role>(json!({
        "apiVersion": "postgresql.sql.crossplane.io/v1alpha1", "kind": "Role",
        "metadata": {"name": "readers"},
        "spec": {"forProvider": {"privileges": {"login": false}}}
    }))
    .await;
    h.apply::<Grant>(json!({
        "apiVersion": "postgresql.sql.crossplane.io/v1alpha1", "kind": "Grant",
        "metadata": {"name": "app-user-in-readers"},
        "spec": {"forProvider": {"role": "app-user", "memberOfRef": {"name": "readers"}}}
    }))
    .await;
    h.condition::<Grant>("app-user-in-readers", "Ready", "True")
        .await;
    assert_eq!(
        h.sql("SELECT pg_has_role('app-user', 'readers', 'MEMBER')"),
        "t"
    );

    // A Grant on a database, by reference to the Role; a revoked privilege is granted again.
    h.apply::<Grant>(json!({
        "apiVersion": "postgresql.sql.crossplane.io/v1alpha1", "kind": "Grant",
        "metadata": {"name": "app-user-on-app"},
        "spec": {"forProvider": {"privileges": ["CONNECT", "CREATE"],
            "roleRef": {"name": "app-user"}, "database": "app"}}
    }))
    .await;
    h.condition::<Grant>("app-user-on-app", "Ready", "True")
        .await;
    let can_create = "SELECT has_database_privilege('app-user', 'app', 'CREATE')";
    assert_eq!(h.sql(can_create), "t");
    h.sql("REVOKE CREATE ON DATABASE app FROM \"app-user\"");
    h.until_sql("the revoked privilege is granted again", can_create, "t")
        .await;

    // The server down: Synced=False with the error; back up: Synced=True again.
    tokio::task::block_in_place(|| h.pg.stop()).expect("stop PostgreSQL");
    let message = h.condition::<Database>("app", "Synced", "False").await;
    assert!(
        message.contains("PostgreSQL") || message.contains("connect"),
        "Synced's message does not say why: {message}"
    );
    tokio::task::block_in_place(|| h.pg.start_again()).expect("start PostgreSQL");
    h.condition::<Database>("app", "Synced", "True").await;
    h.condition::<Role>("app-user", "Synced", "True").await;

    // Deletion: Orphan leaves the database, Delete drops it.
    for name in ["kept", "dropped"] {
        databases
            .delete(name, &DeleteParams::default())
            .await
            .expect("delete");
    }
    for name in ["kept", "dropped"] {
        eventually(&format!("Database {name} is gone from the API"), || async {
            matches!(databases.get_opt(name).await, Ok(None))
        })
        .await;
    }
    // A Grant whose referenced Role object is gone already can still be deleted.
    let roles = h.client.api::<Role>();
    let grants = h.client.api::<Grant>();
    roles
        .delete("readers", &DeleteParams::default())
        .await
        .expect("delete");
    eventually("Role readers is gone", || async {
        matches!(roles.get_opt("readers").await, Ok(None))
    })
    .await;
    grants
        .delete("app-user-in-readers", &DeleteParams::default())
        .await
        .expect("delete");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        match grants.get_opt("app-user-in-readers").await {
            Ok(None) => break,
            left => assert!(
                std::time::Instant::now() < deadline,
                "Grant app-user-in-readers is not gone: {}",
                serde_json::to_string_pretty(&left.ok().flatten().map(|g| g.status))
                    .unwrap_or_default()
            ),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        h.sql("SELECT count(*) FROM pg_roles WHERE rolname = 'readers'"),
        "0"
    );
    let exists = |name: &str| format!("SELECT count(*) FROM pg_database WHERE datname = '{name}'");
    assert_eq!(h.sql(&exists("kept")), "1", "Orphan dropped the database");
    assert_eq!(h.sql(&exists("dropped")), "0", "Delete left the database");

    h.running.stop().await;
}
