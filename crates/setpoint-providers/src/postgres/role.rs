//! A `Role`'s external object: the role of that name (its external name) on the server.
//! Observed from `pg_roles`; privileges and connection limit the spec leaves unset are written
//! back from the server's defaults; drifted privileges, connection limit and run-time settings
//! are put back with `ALTER ROLE`; a role dropped behind the loop's back is created again.
//!
//! The password comes from `passwordSecretRef`, or is generated (32 random alphanumerics) when
//! there is none; it is published with `username`, `endpoint` and `port` to the connection
//! Secret (`writeConnectionSecretToRef`). With a password Secret (the loop watches those, so a
//! change is seen at once), the role's SCRAM verifier on the server says whether the role has
//! that password (`scram.rs`; a password changed behind the provider's back is put back);
//! when the provider's login cannot read verifiers, the password last published is compared
//! instead, as provider-sql does. A generated password is set again only when the connection
//! Secret has lost it.

use k8s_openapi::api::core::v1::Secret;
use rand::distributions::Alphanumeric;
use rand::Rng;
use serde_json::{json, Map, Value};
use setpoint_runtime::managed::{
    external_name, ConnectionDetails, Connector, Creation, ExternalClient, ExternalError,
    Observation, Readiness,
};

use super::connector::{secret_data, PostgresConnector, Session};
use super::error::PostgresError;
use super::resources::{Role, RoleConfigurationParameter, RolePrivilege};
use super::scram;
use super::sql::{ident, literal};

/// Observes, creates, alters and drops roles.
pub struct RoleClient(Session);

impl Connector<Role> for PostgresConnector {
    type External = RoleClient;

    async fn connect(&self, object: &Role) -> Result<RoleClient, ExternalError> {
        Ok(RoleClient(self.session(object).await?))
    }
}

/// The namespace of a cluster-scoped object's connection Secret when its reference names none.
const DEFAULT_SECRET_NAMESPACE: &str = "default";
/// The connection-details key of the password.
const PASSWORD: &str = "password";

/// What the role's password needs.
enum Password {
    /// Nothing, as far as can be told.
    Unchanged,
    /// Nothing: the server confirms it is this one (published with the connection details).
    Verified(String),
    /// To be set to this.
    Change(String),
}

/// What `pg_roles` says about one role.
#[derive(Clone, Debug, PartialEq)]
struct Observed {
    privileges: RolePrivilege,
    connection_limit: i32,
    configuration: Vec<RoleConfigurationParameter>,
}

/// The privileges' `CREATE ROLE` keywords, in `pg_roles` column order.
const KEYWORDS: [&str; 7] = [
    "SUPERUSER",
    "INHERIT",
    "CREATEDB",
    "CREATEROLE",
    "LOGIN",
    "REPLICATION",
    "BYPASSRLS",
];

fn flags(p: &RolePrivilege) -> [Option<bool>; 7] {
    [
        p.super_user,
        p.inherit,
        p.create_db,
        p.create_role,
        p.login,
        p.replication,
        p.bypass_rls,
    ]
}

/// The clauses for the privileges that are set (`LOGIN`, `NOSUPERUSER`, …).
fn clauses(p: &RolePrivilege) -> Vec<String> {
    KEYWORDS
        .iter()
        .zip(flags(p))
        .filter_map(|(keyword, flag)| {
            flag.map(|on| {
                if on {
                    (*keyword).to_owned()
                } else {
                    format!("NO{keyword}")
                }
            })
        })
        .collect()
}

/// The clauses for the privileges the spec sets and the role does not have.
fn changed_clauses(wanted: &RolePrivilege, observed: &RolePrivilege) -> Vec<String> {
    let differing = RolePrivilege {
        super_user: wanted
            .super_user
            .filter(|w| Some(*w) != observed.super_user),
        inherit: wanted.inherit.filter(|w| Some(*w) != observed.inherit),
        create_db: wanted.create_db.filter(|w| Some(*w) != observed.create_db),
        create_role: wanted
            .create_role
            .filter(|w| Some(*w) != observed.create_role),
        login: wanted.login.filter(|w| Some(*w) != observed.login),
        replication: wanted
            .replication
            .filter(|w| Some(*w) != observed.replication),
        bypass_rls: wanted
            .bypass_rls
            .filter(|w| Some(*w) != observed.bypass_rls),
    };
    clauses(&differing)
}

impl RoleClient {
    async fn read(&self, name: &str) -> Result<Option<Observed>, PostgresError> {
        let what = || format!("reading role {name}");
        let row = self
            .0
            .db
            .query_opt(
                "SELECT rolsuper, rolinherit, rolcreatedb, rolcreaterole, rolcanlogin, \
                 rolreplication, rolbypassrls, rolconnlimit, rolconfig \
                 FROM pg_catalog.pg_roles WHERE rolname = $1",
                &[&name],
            )
            .await
            .map_err(PostgresError::sql(what()))?;
        let Some(row) = row else {
            return Ok(None);
        };
        let flag = |i: usize| row.try_get::<_, bool>(i).map(Some);
        let privileges = (|| {
            Ok::<_, tokio_postgres::Error>(RolePrivilege {
                super_user: flag(0)?,
                inherit: flag(1)?,
                create_db: flag(2)?,
                create_role: flag(3)?,
                login: flag(4)?,
                replication: flag(5)?,
                bypass_rls: flag(6)?,
            })
        })()
        .map_err(PostgresError::sql(what()))?;
        let connection_limit: i32 = row.try_get(7).map_err(PostgresError::sql(what()))?;
        let config: Option<Vec<String>> = row.try_get(8).map_err(PostgresError::sql(what()))?;
        Ok(Some(Observed {
            privileges,
            connection_limit,
            configuration: parse_configuration(&config.unwrap_or_default()),
        }))
    }

    /// The password the spec asks for: the password Secret's value, if it names one.
    async fn wanted_password(&self, object: &Role) -> Result<Option<String>, PostgresError> {
        let Some(r) = &object.spec.for_provider.password_secret_ref else {
            return Ok(None);
        };
        let data = secret_data(&self.0.api, &r.namespace, &r.name).await?;
        let value = data.get(&r.key).ok_or_else(|| PostgresError::MissingKey {
            secret: format!("{}/{}", r.namespace, r.name),
            key: r.key.clone(),
        })?;
        Ok(Some(String::from_utf8_lossy(value).into_owned()))
    }

    /// The password last published in the connection Secret: `None` without a connection
    /// Secret reference, `Some(None)` when the Secret or its key is missing.
    async fn published_password(
        &self,
        object: &Role,
    ) -> Result<Option<Option<String>>, PostgresError> {
        let Some(r) = &object.spec.resource.write_connection_secret_to_ref else {
            return Ok(None);
        };
        let namespace = r.namespace.as_deref().unwrap_or(DEFAULT_SECRET_NAMESPACE);
        let secret = self
            .0
            .api
            .namespaced_api::<Secret>(namespace)
            .get_opt(&r.name)
            .await
            .map_err(|source| PostgresError::Read {
                what: format!("Secret {namespace}/{}", r.name),
                source,
            })?;
        Ok(Some(secret.and_then(|s| {
            s.data?
                .get(PASSWORD)
                .map(|v| String::from_utf8_lossy(&v.0).into_owned())
        })))
    }

    /// The role's password verifier, when the provider's login may read it (a superuser).
    async fn verifier(&self, name: &str) -> Option<String> {
        let row = self
            .0
            .db
            .query_opt(
                "SELECT rolpassword FROM pg_catalog.pg_authid WHERE rolname = $1",
                &[&name],
            )
            .await
            .ok()??;
        row.try_get::<_, Option<String>>(0).ok()?
    }

    /// Whether the role's password must change. With a password Secret, the server's verifier
    /// says whether the role has that password (so a change behind the provider's back is
    /// seen); when it cannot tell, the password last published in the connection Secret is
    /// compared instead (provider-sql's rule). A generated password is set again only when the
    /// connection Secret has lost it.
    async fn check_password(&self, object: &Role) -> Result<Password, PostgresError> {
        let wanted = self.wanted_password(object).await?;
        if let Some(wanted) = &wanted {
            let verifier = self.verifier(&external_name(object)).await;
            match verifier.and_then(|v| scram::matches(&v, wanted)) {
                Some(true) => return Ok(Password::Verified(wanted.clone())),
                Some(false) => return Ok(Password::Change(wanted.clone())),
                None => {}
            }
        }
        let published = self.published_password(object).await?;
        Ok(match (wanted, published) {
            (Some(wanted), Some(published)) if published.as_deref() != Some(wanted.as_str()) => {
                Password::Change(wanted)
            }
            (None, Some(None)) => Password::Change(generate_password()),
            _ => Password::Unchanged,
        })
    }

    async fn execute(&self, name: &str, statement: &str) -> Result<(), PostgresError> {
        self.0
            .db
            .batch_execute(statement)
            .await
            .map_err(PostgresError::sql(format!("altering role {name}")))
    }

    /// Sets the role's run-time settings to exactly `wanted`, in one transaction.
    async fn configure(
        &self,
        name: &str,
        wanted: &[RoleConfigurationParameter],
    ) -> Result<(), PostgresError> {
        let role = ident(name);
        // One simple query: one implicit transaction (see `grant.rs` on why not BEGIN).
        let mut statement = format!("ALTER ROLE {role} RESET ALL;");
        for p in wanted {
            statement.push_str(&format!(
                " ALTER ROLE {role} SET {} = {};",
                ident(&p.name),
                literal(&p.value)
            ));
        }
        self.execute(name, &statement).await
    }
}

impl ExternalClient<Role> for RoleClient {
    async fn observe(&self, object: &Role) -> Result<Observation, ExternalError> {
        let name = external_name(object);
        let Some(observed) = self.read(&name).await? else {
            return Ok(Observation::missing());
        };
        let spec = &object.spec.for_provider;
        let mut drift = Vec::new();
        for ((keyword, wanted), actual) in KEYWORDS
            .iter()
            .zip(flags(&spec.privileges))
            .zip(flags(&observed.privileges))
        {
            if wanted.is_some() && wanted != actual {
                drift.push(format!("{keyword} is {}", actual.unwrap_or_default()));
            }
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
        if let Some(wanted) = &spec.configuration_parameters {
            if sorted(wanted) != sorted(&observed.configuration) {
                drift.push("configuration parameters differ".to_owned());
            }
        }
        let mut details = self.0.server.details(&name, None);
        match self.check_password(object).await? {
            Password::Change(_) => drift.push("the password changed".to_owned()),
            Password::Verified(password) => {
                details = self.0.server.details(&name, Some(&password));
            }
            Password::Unchanged => {}
        }
        Ok(Observation {
            exists: true,
            up_to_date: drift.is_empty(),
            diff: (!drift.is_empty()).then(|| drift.join(", ")),
            late_initialized: late_init(&spec.privileges, spec.connection_limit, &observed),
            status: Some(json!({"atProvider": {
                "privilegesAsClauses": clauses(&observed.privileges),
                "configurationParameters": observed.configuration,
            }})),
            readiness: Readiness::Available,
            connection_details: details,
            next_observation: None,
        })
    }

    async fn create(&self, object: &Role) -> Result<Creation, ExternalError> {
        let name = external_name(object);
        let spec = &object.spec.for_provider;
        let password = match self.wanted_password(object).await? {
            Some(p) => p,
            None => generate_password(),
        };
        let mut statement = format!(
            "CREATE ROLE {} WITH PASSWORD {}",
            ident(&name),
            literal(&password)
        );
        for clause in clauses(&spec.privileges) {
            statement.push(' ');
            statement.push_str(&clause);
        }
        if let Some(limit) = spec.connection_limit {
            statement.push_str(&format!(" CONNECTION LIMIT {limit}"));
        }
        self.0
            .db
            .batch_execute(&statement)
            .await
            .map_err(PostgresError::sql(format!("creating role {name}")))?;
        if let Some(wanted) = &spec.configuration_parameters {
            self.configure(&name, wanted).await?;
        }
        Ok(Creation {
            external_name: None,
            connection_details: self.0.server.details(&name, Some(&password)),
        })
    }

    async fn update(&self, object: &Role) -> Result<ConnectionDetails, ExternalError> {
        let name = external_name(object);
        let role = ident(&name);
        let spec = &object.spec.for_provider;
        let Some(observed) = self.read(&name).await? else {
            return Err(PostgresError::Invalid(format!("role {name} vanished")).into());
        };
        // Only what differs: changing SUPERUSER, REPLICATION or BYPASSRLS at all needs a
        // superuser, so a login with CREATEROLE can manage roles that leave them alone.
        let changed = changed_clauses(&spec.privileges, &observed.privileges);
        if !changed.is_empty() {
            self.execute(
                &name,
                &format!("ALTER ROLE {role} WITH {}", changed.join(" ")),
            )
            .await?;
        }
        if let Some(limit) = spec
            .connection_limit
            .filter(|l| *l != observed.connection_limit)
        {
            self.execute(
                &name,
                &format!("ALTER ROLE {role} CONNECTION LIMIT {limit}"),
            )
            .await?;
        }
        if let Some(wanted) = &spec.configuration_parameters {
            if sorted(&observed.configuration) != sorted(wanted) {
                self.configure(&name, wanted).await?;
            }
        }
        match self.check_password(object).await? {
            Password::Change(password) => {
                self.execute(
                    &name,
                    &format!("ALTER ROLE {role} WITH PASSWORD {}", literal(&password)),
                )
                .await?;
                Ok(self.0.server.details(&name, Some(&password)))
            }
            Password::Verified(_) | Password::Unchanged => Ok(ConnectionDetails::new()),
        }
    }

    async fn delete(&self, object: &Role) -> Result<(), ExternalError> {
        let name = external_name(object);
        self.0
            .db
            .batch_execute(&format!("DROP ROLE IF EXISTS {}", ident(&name)))
            .await
            .map_err(PostgresError::sql(format!("dropping role {name}")))?;
        Ok(())
    }
}

/// A fresh password: 32 random alphanumerics.
fn generate_password() -> String {
    rand::thread_rng()
        .sample_iter(&Alphanumeric)
        .take(32)
        .map(char::from)
        .collect()
}

/// `rolconfig`'s `name=value` entries.
fn parse_configuration(entries: &[String]) -> Vec<RoleConfigurationParameter> {
    entries
        .iter()
        .map(|e| {
            let (name, value) = e.split_once('=').unwrap_or((e.as_str(), ""));
            RoleConfigurationParameter {
                name: name.to_owned(),
                value: value.to_owned(),
            }
        })
        .collect()
}

fn sorted(parameters: &[RoleConfigurationParameter]) -> Vec<RoleConfigurationParameter> {
    let mut v = parameters.to_vec();
    v.sort_by(|a, b| a.name.cmp(&b.name));
    v
}

/// The merge patch filling the spec's unset privileges and connection limit from the server.
fn late_init(spec: &RolePrivilege, limit: Option<i32>, observed: &Observed) -> Option<Value> {
    let names = [
        "superUser",
        "inherit",
        "createDb",
        "createRole",
        "login",
        "replication",
        "bypassRls",
    ];
    let mut privileges = Map::new();
    for ((name, wanted), actual) in names
        .iter()
        .zip(flags(spec))
        .zip(flags(&observed.privileges))
    {
        if wanted.is_none() {
            privileges.insert((*name).to_owned(), json!(actual.unwrap_or_default()));
        }
    }
    let mut fields = Map::new();
    if !privileges.is_empty() {
        fields.insert("privileges".to_owned(), Value::Object(privileges));
    }
    if limit.is_none() {
        fields.insert(
            "connectionLimit".to_owned(),
            json!(observed.connection_limit),
        );
    }
    (!fields.is_empty()).then(|| json!({"spec": {"forProvider": fields}}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clauses_should_name_only_set_privileges() {
        let p = RolePrivilege {
            login: Some(true),
            super_user: Some(false),
            ..RolePrivilege::default()
        };
        assert_eq!(clauses(&p), ["NOSUPERUSER", "LOGIN"]);
        assert!(clauses(&RolePrivilege::default()).is_empty());
    }

    #[test]
    fn changed_clauses_should_name_only_differing_privileges() {
        let wanted = RolePrivilege {
            login: Some(true),
            super_user: Some(false),
            create_db: Some(true),
            ..RolePrivilege::default()
        };
        let observed = RolePrivilege {
            login: Some(false),
            super_user: Some(false),
            create_db: Some(true),
            ..RolePrivilege::default()
        };
        assert_eq!(changed_clauses(&wanted, &observed), ["LOGIN"]);
    }

    #[test]
    fn configuration_should_split_at_the_first_equals_sign() {
        let parsed = parse_configuration(&["search_path=a, b".to_owned(), "x=y=z".to_owned()]);
        assert_eq!(parsed[0].name, "search_path");
        assert_eq!(parsed[0].value, "a, b");
        assert_eq!(parsed[1].value, "y=z");
    }

    #[test]
    fn late_init_should_fill_unset_privileges_and_limit() {
        let observed = Observed {
            privileges: RolePrivilege {
                super_user: Some(false),
                inherit: Some(true),
                create_db: Some(false),
                create_role: Some(false),
                login: Some(true),
                replication: Some(false),
                bypass_rls: Some(false),
            },
            connection_limit: -1,
            configuration: Vec::new(),
        };
        let spec = RolePrivilege {
            login: Some(true),
            ..RolePrivilege::default()
        };
        let patch = late_init(&spec, Some(3), &observed).unwrap();
        let fields = &patch["spec"]["forProvider"];
        assert_eq!(fields["privileges"]["inherit"], true);
        assert!(fields["privileges"].get("login").is_none());
        assert!(fields.get("connectionLimit").is_none());
        assert_eq!(late_init(&observed.privileges, Some(-1), &observed), None);
    }

    #[test]
    fn generated_passwords_should_differ() {
        let (a, b) = (generate_password(), generate_password());
        assert_eq!(a.len(), 32);
        assert_ne!(a, b);
    }
}
