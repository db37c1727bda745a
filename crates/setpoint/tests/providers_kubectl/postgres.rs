//! The PostgreSQL provider as a user meets it: `setpoint server` (its built-in loop
//! `provider-postgresql`), a real PostgreSQL on a free port (`LocalPostgres`), and
//! `examples/postgres/*.yaml` applied with kubectl (`${PGPORT}` and `${PGPASSWORD}` filled in
//! as `envsubst` would) — `kubectl wait --for=condition=Ready`, then the server itself shows the
//! database, and the Role's connection Secret logs in. Deleting the objects drops what they made.

use std::path::Path;

use setpoint_providers::postgres::LocalPostgres;
use setpoint_testenv::eventually_blocking;
use setpoint_testenv::process::Server;

#[test]
fn examples_should_make_a_database_a_role_and_a_grant_that_psql_sees() {
    let pg = LocalPostgres::start().unwrap_or_else(|e| panic!("starting PostgreSQL: {e}"));
    let server = Server::start();
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/postgres");
    for file in ["providerconfig", "database", "role", "grant"] {
        let text = std::fs::read_to_string(examples.join(format!("{file}.yaml")))
            .expect("example")
            .replace("${PGPORT}", &pg.port().to_string())
            .replace("${PGPASSWORD}", pg.password());
        // The provider installs its CRDs when it starts: apply until they are served.
        eventually_blocking(&format!("kubectl apply -f {file}.yaml"), || {
            let out = server.kubectl_stdin(&["apply", "-f", "-"], &text);
            if out.status.success() {
                Ok(())
            } else {
                Err(String::from_utf8_lossy(&out.stderr).into_owned())
            }
        });
    }
    server.ok(&[
        "wait",
        "--for=condition=Ready",
        "--timeout=60s",
        "database/example",
        "roles.postgresql.sql.crossplane.io/example-user",
        "grant/example-user-on-example",
    ]);
    let table = server.ok(&["get", "databases"]);
    assert!(
        table.contains("READY") && table.contains("SYNCED") && table.contains("example"),
        "{table}"
    );
    let sql = |statement: &str| {
        pg.psql("postgres", statement)
            .unwrap_or_else(|e| panic!("{statement}: {e}"))
    };
    assert_eq!(
        sql("SELECT datconnlimit, pg_encoding_to_char(encoding) FROM pg_database WHERE datname = 'example'"),
        "20|UTF8"
    );
    assert_eq!(
        sql("SELECT has_database_privilege('example-user', 'example', 'CREATE')"),
        "t"
    );
    let password = server.ok(&[
        "get",
        "secret",
        "example-user-connection",
        "-o",
        "go-template={{.data.password | base64decode}}",
    ]);
    assert_eq!(password, "change-me");
    let me = pg
        .psql_as("example-user", &password, "example", "SELECT current_user")
        .expect("the connection Secret's credentials log in");
    assert_eq!(me, "example-user");

    server.ok(&["delete", "grant/example-user-on-example", "--timeout=60s"]);
    server.ok(&[
        "delete",
        "database/example",
        "roles.postgresql.sql.crossplane.io/example-user",
        "--timeout=60s",
    ]);
    assert_eq!(
        sql("SELECT count(*) FROM pg_database WHERE datname = 'example'"),
        "0"
    );
    assert_eq!(
        sql("SELECT count(*) FROM pg_roles WHERE rolname = 'example-user'"),
        "0"
    );
}
