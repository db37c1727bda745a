//! [`LocalPostgres`]: a throwaway PostgreSQL server for the provider's tests and benchmark (as
//! `setpoint_store::LocalEtcd` is for etcd's) — Debian's packaged binaries
//! (`/usr/lib/postgresql/<version>/bin/`, the newest; or the directory `SETPOINT_PG_BIN`
//! names), a fresh cluster in a temporary directory, listening on 127.0.0.1 on a port that was
//! free and on a Unix socket in that directory. TCP connections authenticate with a password
//! (SCRAM-SHA-256; the superuser `postgres` has [`Postgres::password`]), so a role's password
//! can be proven right or wrong; the socket trusts, for [`Postgres::psql`].
//!
//! PostgreSQL refuses to run as root: as root, the server runs as the `postgres` user (the
//! directory is handed to it) through `setpriv`, which execs, so the child is the postmaster
//! itself. [`Postgres::stop`] shuts it down (fast shutdown), [`Postgres::start_again`] brings it
//! back on the same port and data; dropping a [`Postgres`] stops it and removes the directory.
//! `scripts/check` installs the `postgresql` package when the binaries are missing.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// How long a start or a stop may take before it counts as failed.
const TIMEOUT: Duration = Duration::from_secs(60);

/// Why the server could not be started, stopped or queried.
#[derive(Debug, thiserror::Error)]
pub enum LocalPostgresError {
    /// No PostgreSQL binaries were found.
    #[error(
        "no PostgreSQL binaries in /usr/lib/postgresql/*/bin (apt-get install postgresql, or set SETPOINT_PG_BIN)"
    )]
    NoBinaries,
    /// A command could not be run, or failed.
    #[error("{what}: {detail}")]
    Command {
        /// What was being done.
        what: String,
        /// Its error or output.
        detail: String,
    },
    /// The server did not come up (or go down) in time.
    #[error("{0}")]
    Timeout(String),
}

/// A running (or stopped) PostgreSQL server on a free loopback port, made for a test or a
/// benchmark.
pub struct LocalPostgres {
    bin: PathBuf,
    /// The cluster's directory (`data/`, the socket, the log); removed on drop.
    dir: tempfile::TempDir,
    port: u16,
    password: String,
    run_as_postgres: bool,
    child: Option<Child>,
}

impl LocalPostgres {
    /// Makes a fresh cluster and starts it.
    pub fn start() -> Result<LocalPostgres, LocalPostgresError> {
        let bin = binaries()?;
        let dir = tempfile::Builder::new()
            .prefix("setpoint-pg-")
            .tempdir()
            .map_err(|e| command_error("making the cluster's directory", e))?;
        let run_as_postgres = is_root();
        let password = format!("pw-{}", std::process::id());
        let pwfile = dir.path().join("pwfile");
        std::fs::write(&pwfile, format!("{password}\n"))
            .map_err(|e| command_error("writing the password file", e))?;
        if run_as_postgres {
            run(
                "handing the directory to the postgres user",
                Command::new("chown")
                    .args(["-R", "postgres:postgres"])
                    .arg(dir.path()),
            )?;
        }
        let mut pg = LocalPostgres {
            bin,
            port: free_port()?,
            password,
            run_as_postgres,
            child: None,
            dir,
        };
        let mut initdb = pg.command("initdb");
        initdb
            .arg("-D")
            .arg(pg.data_dir())
            .args(["-U", "postgres", "--auth-local=trust"])
            .args(["--auth-host=scram-sha-256", "--encoding=UTF8", "--locale=C"])
            .arg(format!("--pwfile={}", pwfile.display()));
        run("initdb", &mut initdb)?;
        pg.start_again()?;
        Ok(pg)
    }

    /// Starts the server (again) on its port and data; returns once it accepts connections.
    pub fn start_again(&mut self) -> Result<(), LocalPostgresError> {
        if self.child.is_some() {
            return Ok(());
        }
        let log = std::fs::File::create(self.dir.path().join("postgres.log"))
            .map_err(|e| command_error("creating the server's log", e))?;
        let log_err = log
            .try_clone()
            .map_err(|e| command_error("duplicating the log file", e))?;
        if self.run_as_postgres {
            // The log was created by root: let the server append to it.
            run(
                "handing the log to the postgres user",
                Command::new("chown")
                    .arg("postgres:postgres")
                    .arg(self.dir.path().join("postgres.log")),
            )?;
        }
        let child = self
            .command("postgres")
            .arg("-D")
            .arg(self.data_dir())
            .args(["-p", &self.port.to_string(), "-h", "127.0.0.1", "-k"])
            .arg(self.dir.path())
            .args(["-c", "max_connections=200", "-c", "fsync=off"])
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .spawn()
            .map_err(|e| command_error("starting postgres", e))?;
        self.child = Some(child);
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let ready = Command::new(self.bin.join("pg_isready"))
                .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-q"])
                .status()
                .is_ok_and(|s| s.success());
            if ready {
                return Ok(());
            }
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    self.child = None;
                    return Err(LocalPostgresError::Command {
                        what: "starting postgres".to_owned(),
                        detail: format!("it exited ({status}): {}", self.log_tail()),
                    });
                }
            }
            if Instant::now() > deadline {
                return Err(LocalPostgresError::Timeout(format!(
                    "postgres did not accept connections within {TIMEOUT:?}: {}",
                    self.log_tail()
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Stops the server (fast shutdown: clients are disconnected) and waits for it; the data
    /// stays for [`start_again`](Self::start_again).
    pub fn stop(&mut self) -> Result<(), LocalPostgresError> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        let _ = Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status();
        let deadline = Instant::now() + TIMEOUT;
        loop {
            match child.try_wait() {
                Ok(Some(_)) | Err(_) => return Ok(()),
                Ok(None) if Instant::now() > deadline => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(LocalPostgresError::Timeout(format!(
                        "postgres did not stop within {TIMEOUT:?}"
                    )));
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    }

    /// `127.0.0.1`.
    pub fn host(&self) -> &'static str {
        "127.0.0.1"
    }

    /// The TCP port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The superuser's name (`postgres`).
    pub fn user(&self) -> &'static str {
        "postgres"
    }

    /// The superuser's password (TCP connections need it).
    pub fn password(&self) -> &str {
        &self.password
    }

    /// A `tokio-postgres`/libpq connection string for `user` with `password` to `database`
    /// over TCP.
    pub fn url(&self, user: &str, password: &str, database: &str) -> String {
        format!(
            "host=127.0.0.1 port={} user={user} password={password} dbname={database} connect_timeout=10",
            self.port
        )
    }

    /// Runs `sql` with `psql` as the superuser over the Unix socket, in `database`; its
    /// unaligned, tuples-only output (`a|b` per row), trimmed.
    pub fn psql(&self, database: &str, sql: &str) -> Result<String, LocalPostgresError> {
        let out = run(
            "psql",
            Command::new(self.bin.join("psql"))
                .arg("-h")
                .arg(self.dir.path())
                .args([
                    "-p",
                    &self.port.to_string(),
                    "-U",
                    "postgres",
                    "-d",
                    database,
                ])
                .args(["-v", "ON_ERROR_STOP=1", "-X", "-A", "-t", "-c", sql]),
        )?;
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }

    /// Runs `sql` with `psql` as `user` with `password` over TCP (password authentication), in
    /// `database`; its output as [`psql`](Self::psql)'s.
    pub fn psql_as(
        &self,
        user: &str,
        password: &str,
        database: &str,
        sql: &str,
    ) -> Result<String, LocalPostgresError> {
        let out = run(
            "psql",
            Command::new(self.bin.join("psql"))
                .args([
                    "-h",
                    "127.0.0.1",
                    "-p",
                    &self.port.to_string(),
                    "-U",
                    user,
                    "-d",
                ])
                .arg(database)
                .args(["-w", "-v", "ON_ERROR_STOP=1", "-X", "-A", "-t", "-c", sql])
                .env("PGPASSWORD", password),
        )?;
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }

    /// The last lines of the server's log (for error messages).
    pub fn log_tail(&self) -> String {
        let text =
            std::fs::read_to_string(self.dir.path().join("postgres.log")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// A command running the PostgreSQL binary `name`, as `postgres` when we are root.
    fn command(&self, name: &str) -> Command {
        let program = self.bin.join(name);
        if self.run_as_postgres {
            let mut c = Command::new("setpriv");
            c.args([
                "--reuid=postgres",
                "--regid=postgres",
                "--init-groups",
                "--reset-env",
            ])
            .arg(program);
            c.current_dir(self.dir.path());
            c
        } else {
            let mut c = Command::new(program);
            c.current_dir(self.dir.path());
            c
        }
    }
}

impl Drop for LocalPostgres {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

/// The newest `/usr/lib/postgresql/<version>/bin`, or `SETPOINT_PG_BIN`.
fn binaries() -> Result<PathBuf, LocalPostgresError> {
    if let Some(dir) = std::env::var_os("SETPOINT_PG_BIN") {
        return Ok(PathBuf::from(dir));
    }
    let root = Path::new("/usr/lib/postgresql");
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir(root)
        .map_err(|_| LocalPostgresError::NoBinaries)?
        .filter_map(Result::ok)
        .filter_map(|e| {
            let version = e.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            bin.join("postgres").exists().then_some((version, bin))
        })
        .collect();
    versions.sort();
    versions
        .pop()
        .map(|(_, bin)| bin)
        .ok_or(LocalPostgresError::NoBinaries)
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

fn free_port() -> Result<u16, LocalPostgresError> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")
        .map_err(|e| command_error("finding a free port", e))?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| command_error("finding a free port", e))
}

fn run(what: &str, command: &mut Command) -> Result<Output, LocalPostgresError> {
    let out = command.output().map_err(|e| command_error(what, e))?;
    if out.status.success() {
        Ok(out)
    } else {
        Err(LocalPostgresError::Command {
            what: what.to_owned(),
            detail: format!(
                "{}: {}{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        })
    }
}

fn command_error(what: &str, e: impl std::fmt::Display) -> LocalPostgresError {
    LocalPostgresError::Command {
        what: what.to_owned(),
        detail: e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postgres_should_serve_sql_stop_and_start_again() {
        let mut pg = LocalPostgres::start().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(pg.psql("postgres", "SELECT 1 + 1").unwrap(), "2");
        let (user, password) = (pg.user(), pg.password().to_owned());
        assert_eq!(
            pg.psql_as(user, &password, "postgres", "SELECT 3").unwrap(),
            "3"
        );
        assert!(pg.psql_as(user, "wrong", "postgres", "SELECT 3").is_err());
        pg.stop().unwrap();
        assert!(pg.psql("postgres", "SELECT 1").is_err());
        pg.start_again().unwrap();
        assert_eq!(pg.psql("postgres", "SELECT 'back'").unwrap(), "back");
    }
}
