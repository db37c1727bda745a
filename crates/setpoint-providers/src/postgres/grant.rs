//! A `Grant`'s external object: either privileges on a database held by a role (observed from
//! the database's access list, `aclexplode(pg_database.datacl)`) or a role's membership in
//! another (observed from `pg_auth_members`). The role, database and group are named directly
//! or by a reference to their managed object, resolved to its external name at every connect;
//! a referenced object that does not exist yet is an error, retried with back-off (and the
//! loop watches Roles and Databases, so their arrival triggers a reconcile).
//!
//! The privileges held must equal those asked for (`ALL` is `CONNECT`, `CREATE` and
//! `TEMPORARY`): drift is put back by revoking all and granting again, in one transaction.

use std::collections::BTreeSet;

use serde_json::json;
use setpoint_runtime::managed::{
    ConnectionDetails, Connector, Creation, ExternalClient, ExternalError, Managed, Observation,
    Readiness,
};
use setpoint_runtime::Client;

use super::connector::{PostgresConnector, Session};
use super::error::PostgresError;
use super::resources::{Database, Grant, GrantOption, GrantParameters, Reference, Role};
use super::sql::ident;

/// What one Grant grants, with every name resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Target {
    /// `privileges` on `database` to `role`.
    Database {
        role: String,
        database: String,
        privileges: BTreeSet<&'static str>,
        grant_option: bool,
    },
    /// Membership in `group` to `role`.
    Member {
        role: String,
        group: String,
        admin_option: bool,
    },
    /// The Grant is being deleted and an object it references is gone: it observes as missing.
    Gone,
}

fn is_not_found(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 404)
}

/// Observes, grants and revokes one Grant's privileges or membership.
pub struct GrantClient {
    session: Session,
    target: Target,
}

impl Connector<Grant> for PostgresConnector {
    type External = GrantClient;

    async fn connect(&self, object: &Grant) -> Result<GrantClient, ExternalError> {
        let session = self.session(object).await?;
        let target = match resolve(&session.api, &object.spec.for_provider).await {
            Ok(target) => target,
            // Deleting a Grant whose role or database object is gone already: nothing is left
            // to revoke.
            Err(PostgresError::Read { source, .. })
                if object.metadata.deletion_timestamp.is_some() && is_not_found(&source) =>
            {
                Target::Gone
            }
            Err(e) => return Err(e.into()),
        };
        Ok(GrantClient { session, target })
    }
}

/// The database privileges a Grant may name, and what each stands for.
fn expand(privilege: &str) -> Option<&'static [&'static str]> {
    Some(match privilege.trim().to_ascii_uppercase().as_str() {
        "ALL" | "ALL PRIVILEGES" => &["CONNECT", "CREATE", "TEMPORARY"],
        "CONNECT" => &["CONNECT"],
        "CREATE" => &["CREATE"],
        "TEMPORARY" | "TEMP" => &["TEMPORARY"],
        _ => return None,
    })
}

/// The Grant's target, with references resolved to their objects' external names.
async fn resolve(api: &Client, p: &GrantParameters) -> Result<Target, PostgresError> {
    let role = name_of::<Role>(api, "role", &p.role, &p.role_ref)
        .await?
        .ok_or_else(|| PostgresError::Invalid("a Grant needs role or roleRef".to_owned()))?;
    let database = name_of::<Database>(api, "database", &p.database, &p.database_ref).await?;
    let group = name_of::<Role>(api, "memberOf", &p.member_of, &p.member_of_ref).await?;
    match (database, group) {
        (Some(database), None) => {
            if p.privileges.is_empty() {
                return Err(PostgresError::Invalid(
                    "a Grant on a database needs privileges".to_owned(),
                ));
            }
            let mut privileges = BTreeSet::new();
            for privilege in &p.privileges {
                let expanded = expand(privilege).ok_or_else(|| {
                    PostgresError::Invalid(format!(
                        "{privilege:?} is not a database privilege (CONNECT, CREATE, TEMPORARY, ALL)"
                    ))
                })?;
                privileges.extend(expanded.iter().copied());
            }
            Ok(Target::Database {
                role,
                database,
                privileges,
                grant_option: p.with_option == Some(GrantOption::Grant),
            })
        }
        (None, Some(group)) if p.privileges.is_empty() => Ok(Target::Member {
            role,
            group,
            admin_option: p.with_option == Some(GrantOption::Admin),
        }),
        (None, Some(_)) => Err(PostgresError::Invalid(
            "a Grant of memberOf cannot have privileges".to_owned(),
        )),
        _ => Err(PostgresError::Invalid(
            "a Grant needs exactly one of database (or databaseRef) and memberOf (or memberOfRef)"
                .to_owned(),
        )),
    }
}

/// `name`, or the external name of the object `reference` names.
async fn name_of<K>(
    api: &Client,
    field: &str,
    name: &Option<String>,
    reference: &Option<Reference>,
) -> Result<Option<String>, PostgresError>
where
    K: Managed + kube::Resource<Scope = k8s_openapi::ClusterResourceScope>,
{
    if let Some(name) = name {
        return Ok(Some(name.clone()));
    }
    let Some(reference) = reference else {
        return Ok(None);
    };
    let object = api
        .api::<K>()
        .get(&reference.name)
        .await
        .map_err(|source| PostgresError::Read {
            what: format!("{field}Ref {}", reference.name),
            source,
        })?;
    Ok(Some(setpoint_runtime::managed::external_name(&object)))
}

fn gone() -> PostgresError {
    PostgresError::Invalid("the Grant is being deleted and names an object that is gone".to_owned())
}

impl GrantClient {
    async fn execute(&self, what: &str, statement: &str) -> Result<(), PostgresError> {
        self.session
            .db
            .batch_execute(statement)
            .await
            .map_err(PostgresError::sql(what))
    }

    /// The statements that make the grant exactly what is asked for: one simple query, which
    /// the server runs as one implicit transaction. (Never `BEGIN` … `COMMIT`: connections are
    /// shared, and a failed statement would leave one in an aborted transaction.)
    fn grant_statement(&self) -> Result<String, PostgresError> {
        Ok(match &self.target {
            Target::Database {
                role,
                database,
                privileges,
                grant_option,
            } => {
                let (role, database) = (ident(role), ident(database));
                let privileges: Vec<&str> = privileges.iter().copied().collect();
                format!(
                    "REVOKE ALL ON DATABASE {database} FROM {role}; \
                     GRANT {} ON DATABASE {database} TO {role}{}",
                    privileges.join(", "),
                    if *grant_option {
                        " WITH GRANT OPTION"
                    } else {
                        ""
                    }
                )
            }
            Target::Member {
                role,
                group,
                admin_option,
            } => {
                let (role, group) = (ident(role), ident(group));
                if *admin_option {
                    format!("GRANT {group} TO {role} WITH ADMIN OPTION")
                } else {
                    format!("GRANT {group} TO {role}; REVOKE ADMIN OPTION FOR {group} FROM {role}")
                }
            }
            Target::Gone => return Err(gone()),
        })
    }
}

impl ExternalClient<Grant> for GrantClient {
    async fn observe(&self, _object: &Grant) -> Result<Observation, ExternalError> {
        let db = &self.session.db;
        match &self.target {
            Target::Gone => Ok(Observation::missing()),
            Target::Database {
                role,
                database,
                privileges,
                grant_option,
            } => {
                let rows = db
                    .query(
                        "SELECT a.privilege_type::text, a.is_grantable \
                         FROM pg_catalog.pg_database d, LATERAL pg_catalog.aclexplode(d.datacl) a \
                         WHERE d.datname = $1 AND a.grantee = \
                         (SELECT oid FROM pg_catalog.pg_roles WHERE rolname = $2)",
                        &[database, role],
                    )
                    .await
                    .map_err(PostgresError::sql(format!(
                        "reading the privileges of {role} on database {database}"
                    )))?;
                if rows.is_empty() {
                    return Ok(Observation::missing());
                }
                let mut held = BTreeSet::new();
                let mut grantable = true;
                for row in &rows {
                    let privilege: String = row
                        .try_get(0)
                        .map_err(PostgresError::sql("reading privileges"))?;
                    let is_grantable: bool = row
                        .try_get(1)
                        .map_err(PostgresError::sql("reading privileges"))?;
                    held.insert(privilege);
                    grantable &= is_grantable;
                }
                let wanted: BTreeSet<String> = privileges.iter().map(|p| (*p).to_owned()).collect();
                let up_to_date = held == wanted && grantable == *grant_option;
                Ok(Observation {
                    up_to_date,
                    diff: (!up_to_date).then(|| {
                        format!(
                            "{role} holds {:?}{} on {database}",
                            held,
                            if grantable { " with grant option" } else { "" }
                        )
                    }),
                    status: Some(json!({"atProvider": {"privileges": held}})),
                    ..Observation::available()
                })
            }
            Target::Member {
                role,
                group,
                admin_option,
            } => {
                let rows = db
                    .query(
                        "SELECT m.admin_option FROM pg_catalog.pg_auth_members m \
                         JOIN pg_catalog.pg_roles g ON m.roleid = g.oid \
                         JOIN pg_catalog.pg_roles u ON m.member = u.oid \
                         WHERE g.rolname = $1 AND u.rolname = $2",
                        &[group, role],
                    )
                    .await
                    .map_err(PostgresError::sql(format!(
                        "reading the membership of {role} in {group}"
                    )))?;
                if rows.is_empty() {
                    return Ok(Observation::missing());
                }
                let mut admin = false;
                for row in &rows {
                    admin |= row
                        .try_get::<_, bool>(0)
                        .map_err(PostgresError::sql("reading memberships"))?;
                }
                let up_to_date = admin == *admin_option;
                Ok(Observation {
                    up_to_date,
                    diff: (!up_to_date).then(|| format!("admin option is {admin}")),
                    readiness: Readiness::Available,
                    ..Observation::available()
                })
            }
        }
    }

    async fn create(&self, _object: &Grant) -> Result<Creation, ExternalError> {
        self.execute("granting", &self.grant_statement()?).await?;
        Ok(Creation::default())
    }

    async fn update(&self, _object: &Grant) -> Result<ConnectionDetails, ExternalError> {
        self.execute("granting again", &self.grant_statement()?)
            .await?;
        Ok(ConnectionDetails::new())
    }

    async fn delete(&self, _object: &Grant) -> Result<(), ExternalError> {
        let statement = match &self.target {
            Target::Database { role, database, .. } => {
                format!(
                    "REVOKE ALL ON DATABASE {} FROM {}",
                    ident(database),
                    ident(role)
                )
            }
            Target::Member { role, group, .. } => {
                format!("REVOKE {} FROM {}", ident(group), ident(role))
            }
            Target::Gone => return Ok(()),
        };
        self.execute("revoking", &statement).await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn privileges_should_expand_and_reject_unknown_words() {
        assert_eq!(expand("all"), Some(&["CONNECT", "CREATE", "TEMPORARY"][..]));
        assert_eq!(expand("TEMP"), Some(&["TEMPORARY"][..]));
        assert_eq!(expand("CONNECT; DROP DATABASE x"), None);
        assert_eq!(expand("SELECT"), None);
    }
}
