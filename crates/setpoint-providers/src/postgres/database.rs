//! A `Database`'s external object: the database of that name (its external name) on the
//! server. Observed from `pg_database`; settings the spec leaves unset are written back from
//! the server's defaults (late initialisation: owner, encoding, collation, character
//! classification, tablespace, connection limit, allow-connections, is-template); the owner,
//! connection limit, allow-connections and is-template are put back with `ALTER DATABASE`
//! when they drift. Encoding, collation, character classification and tablespace are fixed at
//! creation: a database whose differ from the spec is reported `Ready=False`, not recreated.

use serde_json::{json, Map, Value};
use setpoint_runtime::managed::{
    external_name, ConnectionDetails, Connector, Creation, ExternalClient, ExternalError,
    Observation, Readiness,
};

use super::connector::{PostgresConnector, Session};
use super::error::PostgresError;
use super::resources::{Database, DatabaseParameters};
use super::sql::{ident, ident_or_default, literal_or_default};

/// Observes, creates, alters and drops databases.
pub struct DatabaseClient(Session);

impl Connector<Database> for PostgresConnector {
    type External = DatabaseClient;

    async fn connect(&self, object: &Database) -> Result<DatabaseClient, ExternalError> {
        Ok(DatabaseClient(self.session(object).await?))
    }
}

/// What `pg_database` says about one database.
#[derive(Clone, Debug, PartialEq)]
struct Observed {
    owner: String,
    encoding: String,
    lc_collate: String,
    lc_c_type: String,
    allow_connections: bool,
    connection_limit: i32,
    is_template: bool,
    tablespace: String,
}

impl DatabaseClient {
    async fn read(&self, name: &str) -> Result<Option<Observed>, PostgresError> {
        let row = self
            .0
            .db
            .query_opt(
                "SELECT pg_catalog.pg_get_userbyid(d.datdba)::text, \
                 pg_catalog.pg_encoding_to_char(d.encoding)::text, d.datcollate::text, \
                 d.datctype::text, d.datallowconn, d.datconnlimit, d.datistemplate, \
                 t.spcname::text \
                 FROM pg_catalog.pg_database d \
                 JOIN pg_catalog.pg_tablespace t ON d.dattablespace = t.oid \
                 WHERE d.datname = $1",
                &[&name],
            )
            .await
            .map_err(PostgresError::sql(format!("reading database {name}")))?;
        let Some(row) = row else {
            return Ok(None);
        };
        let get = |e| PostgresError::sql(format!("reading database {name}"))(e);
        Ok(Some(Observed {
            owner: row.try_get(0).map_err(get)?,
            encoding: row.try_get(1).map_err(get)?,
            lc_collate: row.try_get(2).map_err(get)?,
            lc_c_type: row.try_get(3).map_err(get)?,
            allow_connections: row.try_get(4).map_err(get)?,
            connection_limit: row.try_get(5).map_err(get)?,
            is_template: row.try_get(6).map_err(get)?,
            tablespace: row.try_get(7).map_err(get)?,
        }))
    }

    async fn execute(&self, what: String, statement: &str) -> Result<(), PostgresError> {
        self.0
            .db
            .batch_execute(statement)
            .await
            .map_err(PostgresError::sql(what))
    }
}

impl ExternalClient<Database> for DatabaseClient {
    async fn observe(&self, object: &Database) -> Result<Observation, ExternalError> {
        let name = external_name(object);
        let Some(observed) = self.read(&name).await? else {
            return Ok(Observation::missing());
        };
        let spec = &object.spec.for_provider;
        let drift = drift(spec, &observed);
        let fixed = fixed_mismatch(spec, &observed);
        Ok(Observation {
            exists: true,
            up_to_date: drift.is_empty(),
            diff: (!drift.is_empty()).then(|| drift.join(", ")),
            late_initialized: late_init(spec, &observed),
            status: Some(json!({"atProvider": {
                "owner": observed.owner,
                "connectionLimit": observed.connection_limit,
            }})),
            readiness: match fixed {
                None => Readiness::Available,
                Some(message) => Readiness::Unavailable(message),
            },
            connection_details: ConnectionDetails::new(),
            next_observation: None,
        })
    }

    async fn create(&self, object: &Database) -> Result<Creation, ExternalError> {
        let name = external_name(object);
        let p = &object.spec.for_provider;
        let mut statement = format!("CREATE DATABASE {}", ident(&name));
        if let Some(owner) = &p.owner {
            statement.push_str(&format!(" OWNER {}", ident(owner)));
        }
        if let Some(template) = &p.template {
            statement.push_str(&format!(" TEMPLATE {}", ident_or_default(template)));
        }
        if let Some(encoding) = &p.encoding {
            statement.push_str(&format!(" ENCODING {}", literal_or_default(encoding)));
        }
        if let Some(collate) = &p.lc_collate {
            statement.push_str(&format!(" LC_COLLATE {}", literal_or_default(collate)));
        }
        if let Some(ctype) = &p.lc_c_type {
            statement.push_str(&format!(" LC_CTYPE {}", literal_or_default(ctype)));
        }
        if let Some(tablespace) = &p.tablespace {
            statement.push_str(&format!(" TABLESPACE {}", ident_or_default(tablespace)));
        }
        if let Some(allow) = p.allow_connections {
            statement.push_str(&format!(" ALLOW_CONNECTIONS {allow}"));
        }
        if let Some(limit) = p.connection_limit {
            statement.push_str(&format!(" CONNECTION LIMIT {limit}"));
        }
        if let Some(template) = p.is_template {
            statement.push_str(&format!(" IS_TEMPLATE {template}"));
        }
        self.execute(format!("creating database {name}"), &statement)
            .await?;
        Ok(Creation::default())
    }

    async fn update(&self, object: &Database) -> Result<ConnectionDetails, ExternalError> {
        let name = external_name(object);
        let db = ident(&name);
        let p = &object.spec.for_provider;
        let mut statements = Vec::new();
        if let Some(owner) = &p.owner {
            statements.push(format!("ALTER DATABASE {db} OWNER TO {}", ident(owner)));
        }
        if let Some(limit) = p.connection_limit {
            statements.push(format!("ALTER DATABASE {db} CONNECTION LIMIT {limit}"));
        }
        if let Some(allow) = p.allow_connections {
            statements.push(format!("ALTER DATABASE {db} ALLOW_CONNECTIONS {allow}"));
        }
        if let Some(template) = p.is_template {
            statements.push(format!("ALTER DATABASE {db} IS_TEMPLATE {template}"));
        }
        for statement in statements {
            self.execute(format!("altering database {name}"), &statement)
                .await?;
        }
        Ok(ConnectionDetails::new())
    }

    async fn delete(&self, object: &Database) -> Result<(), ExternalError> {
        let name = external_name(object);
        let db = ident(&name);
        // A template database cannot be dropped.
        if self.read(&name).await?.is_some_and(|o| o.is_template) {
            self.execute(
                format!("unmarking template database {name}"),
                &format!("ALTER DATABASE {db} IS_TEMPLATE false"),
            )
            .await?;
        }
        self.execute(
            format!("dropping database {name}"),
            &format!("DROP DATABASE IF EXISTS {db}"),
        )
        .await?;
        Ok(())
    }
}

/// The settings that can be altered and differ from the spec, described.
fn drift(spec: &DatabaseParameters, observed: &Observed) -> Vec<String> {
    let mut drift = Vec::new();
    if let Some(owner) = spec.owner.as_ref().filter(|o| **o != observed.owner) {
        drift.push(format!("owner is {}, not {owner}", observed.owner));
    }
    if let Some(limit) = spec
        .connection_limit
        .filter(|l| *l != observed.connection_limit)
    {
        drift.push(format!(
            "connection limit is {}, not {limit}",
            observed.connection_limit
        ));
    }
    if let Some(allow) = spec
        .allow_connections
        .filter(|a| *a != observed.allow_connections)
    {
        drift.push(format!(
            "allow connections is {}, not {allow}",
            observed.allow_connections
        ));
    }
    if let Some(template) = spec.is_template.filter(|t| *t != observed.is_template) {
        drift.push(format!(
            "is template is {}, not {template}",
            observed.is_template
        ));
    }
    drift
}

/// A message when a setting fixed at creation differs from the spec.
fn fixed_mismatch(spec: &DatabaseParameters, observed: &Observed) -> Option<String> {
    let fixed = [
        ("encoding", &spec.encoding, &observed.encoding),
        ("lcCollate", &spec.lc_collate, &observed.lc_collate),
        ("lcCType", &spec.lc_c_type, &observed.lc_c_type),
        ("tablespace", &spec.tablespace, &observed.tablespace),
    ];
    let wrong: Vec<String> = fixed
        .iter()
        .filter_map(|(field, wanted, actual)| {
            let wanted = wanted.as_deref()?;
            (wanted != "DEFAULT" && normalized(wanted) != normalized(actual))
                .then(|| format!("{field} is {actual:?}, not {wanted:?}"))
        })
        .collect();
    (!wrong.is_empty())
        .then(|| format!("{} (fixed when the database was created)", wrong.join(", ")))
}

/// `UTF8`, `utf-8` and `Utf8` are one encoding.
fn normalized(value: &str) -> String {
    value.replace(['-', '_'], "").to_ascii_lowercase()
}

/// The merge patch filling the spec's unset settings with the observed ones, if any is unset.
fn late_init(spec: &DatabaseParameters, observed: &Observed) -> Option<Value> {
    let mut fields = Map::new();
    let mut fill = |key: &str, unset: bool, value: Value| {
        if unset {
            fields.insert(key.to_owned(), value);
        }
    };
    fill("owner", spec.owner.is_none(), json!(observed.owner));
    fill(
        "encoding",
        spec.encoding.is_none(),
        json!(observed.encoding),
    );
    fill(
        "lcCollate",
        spec.lc_collate.is_none(),
        json!(observed.lc_collate),
    );
    fill(
        "lcCType",
        spec.lc_c_type.is_none(),
        json!(observed.lc_c_type),
    );
    fill(
        "tablespace",
        spec.tablespace.is_none(),
        json!(observed.tablespace),
    );
    fill(
        "allowConnections",
        spec.allow_connections.is_none(),
        json!(observed.allow_connections),
    );
    fill(
        "connectionLimit",
        spec.connection_limit.is_none(),
        json!(observed.connection_limit),
    );
    fill(
        "isTemplate",
        spec.is_template.is_none(),
        json!(observed.is_template),
    );
    (!fields.is_empty()).then(|| json!({"spec": {"forProvider": fields}}))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn observed() -> Observed {
        Observed {
            owner: "postgres".to_owned(),
            encoding: "UTF8".to_owned(),
            lc_collate: "C".to_owned(),
            lc_c_type: "C".to_owned(),
            allow_connections: true,
            connection_limit: -1,
            is_template: false,
            tablespace: "pg_default".to_owned(),
        }
    }

    #[test]
    fn late_init_should_fill_only_unset_settings() {
        let spec = DatabaseParameters {
            connection_limit: Some(5),
            encoding: Some("utf-8".to_owned()),
            ..DatabaseParameters::default()
        };
        let patch = late_init(&spec, &observed()).unwrap();
        let fields = &patch["spec"]["forProvider"];
        assert_eq!(fields["owner"], "postgres");
        assert_eq!(fields["lcCollate"], "C");
        assert!(fields.get("connectionLimit").is_none());
        assert!(fields.get("encoding").is_none());
        let full = DatabaseParameters {
            owner: Some("postgres".to_owned()),
            encoding: Some("UTF8".to_owned()),
            lc_collate: Some("C".to_owned()),
            lc_c_type: Some("C".to_owned()),
            tablespace: Some("pg_default".to_owned()),
            allow_connections: Some(true),
            connection_limit: Some(-1),
            is_template: Some(false),
            template: None,
        };
        assert_eq!(late_init(&full, &observed()), None);
    }

    #[test]
    fn drift_should_name_altered_settings_and_ignore_unset_ones() {
        let spec = DatabaseParameters {
            connection_limit: Some(5),
            ..DatabaseParameters::default()
        };
        assert_eq!(drift(&spec, &observed()), ["connection limit is -1, not 5"]);
        let unset = DatabaseParameters::default();
        assert!(drift(&unset, &observed()).is_empty());
    }

    #[test]
    fn fixed_settings_should_compare_encodings_loosely() {
        let spec = DatabaseParameters {
            encoding: Some("utf-8".to_owned()),
            ..DatabaseParameters::default()
        };
        assert_eq!(fixed_mismatch(&spec, &observed()), None);
        let spec = DatabaseParameters {
            encoding: Some("LATIN1".to_owned()),
            ..DatabaseParameters::default()
        };
        assert!(fixed_mismatch(&spec, &observed())
            .unwrap()
            .contains("encoding is \"UTF8\""));
    }
}
