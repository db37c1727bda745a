//! The control-plane roles of `setpoint server` (`--roles`), and the leader-elected running of
//! the built-in loops: every server process may run the controllers and the scheduler, but each
//! group acts only while this process holds its Lease in `kube-system`
//! (`setpoint-controller-manager`, `setpoint-scheduler`), as kube-controller-manager and
//! kube-scheduler do. Losing the Lease cancels the group's loops before another process may take
//! over; a graceful stop releases the Lease so a standby takes over at once.

use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use setpoint_controllers::{Loop, LoopClients, LoopContext, LoopSelection, LoopSettings};
use setpoint_runtime::Metrics;
use setpoint_runtime::{Client, ElectionEnd, LeaderElection, LeaderElectionConfig, LeaseLock};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::identities::Identities;

/// The namespace of the loops' Leases.
const LEASE_NAMESPACE: &str = "kube-system";
/// The Lease of every loop except the scheduler.
pub(crate) const CONTROLLER_MANAGER_LEASE: &str = "setpoint-controller-manager";
/// The scheduler's Lease.
pub(crate) const SCHEDULER_LEASE: &str = "setpoint-scheduler";

/// One part of the control plane that `setpoint server` can run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Role {
    /// The Kubernetes API over HTTPS, on the store.
    Apiserver,
    /// Every built-in loop `--controllers` selects except the scheduler (leader-elected).
    Controllers,
    /// The scheduler loop, if `--controllers` selects it (leader-elected).
    Scheduler,
    /// The local node agent and any simulated nodes.
    Agent,
}

impl Role {
    const ALL: [Role; 4] = [
        Role::Apiserver,
        Role::Controllers,
        Role::Scheduler,
        Role::Agent,
    ];

    fn name(self) -> &'static str {
        match self {
            Role::Apiserver => "apiserver",
            Role::Controllers => "controllers",
            Role::Scheduler => "scheduler",
            Role::Agent => "agent",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The roles one process runs: `--roles apiserver,controllers,scheduler,agent`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Roles(Vec<Role>);

impl Roles {
    /// Whether `role` is among these.
    pub(crate) fn has(&self, role: Role) -> bool {
        self.0.contains(&role)
    }
}

impl Default for Roles {
    fn default() -> Self {
        Roles(Role::ALL.to_vec())
    }
}

impl FromStr for Roles {
    type Err = String;

    fn from_str(s: &str) -> Result<Roles, String> {
        let mut roles = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let role = Role::ALL
                .into_iter()
                .find(|r| r.name() == part)
                .ok_or_else(|| {
                    format!(
                        "unknown role {part:?}; known: apiserver, controllers, scheduler, agent"
                    )
                })?;
            if !roles.contains(&role) {
                roles.push(role);
            }
        }
        if roles.is_empty() {
            return Err("--roles needs at least one role".to_owned());
        }
        roles.sort();
        Ok(Roles(roles))
    }
}

/// Leader-election flags of `setpoint server`, named as kube-controller-manager's.
#[derive(Debug, Args)]
pub(crate) struct LeaderElectArgs {
    /// Run the controllers and the scheduler only while holding their Lease in `kube-system`
    /// (`setpoint-controller-manager`, `setpoint-scheduler`), so that of several processes
    /// exactly one acts. Default: on, except in a server with the apiserver role on the
    /// embedded store (a single-server cluster, whose loops then resume at once after a
    /// crash); `--leader-elect` forces it on (when other processes run loops against that
    /// server), `--leader-elect=false` off.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", action = clap::ArgAction::Set)]
    pub(crate) leader_elect: Option<bool>,
    /// How long a standby waits, after it last saw the Lease renewed, before taking it over
    /// (whole seconds).
    #[arg(long, value_name = "DURATION", default_value = "15s", value_parser = crate::cli::parse_duration)]
    pub(crate) leader_elect_lease_duration: Duration,
    /// How long the leader keeps trying to renew before it stops acting; shorter than the
    /// lease duration.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = crate::cli::parse_duration)]
    pub(crate) leader_elect_renew_deadline: Duration,
    /// How often the leader renews and a standby tries to acquire.
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = crate::cli::parse_duration)]
    pub(crate) leader_elect_retry_period: Duration,
}

impl LeaderElectArgs {
    /// Whether to elect, given whether this process serves the API on the embedded store.
    pub(crate) fn enabled(&self, serves_embedded_store: bool) -> bool {
        self.leader_elect.unwrap_or(!serves_embedded_store)
    }

    /// The election timings and an identity of host name, process id and a random part.
    fn config(&self) -> LeaderElectionConfig {
        let default = LeaderElectionConfig::default();
        let identity = match default.identity.rsplit_once('_') {
            Some((host, random)) => format!("{host}_{}_{random}", std::process::id()),
            None => format!("{}_{}", default.identity, std::process::id()),
        };
        LeaderElectionConfig {
            identity,
            lease_duration: self.leader_elect_lease_duration,
            renew_deadline: self.leader_elect_renew_deadline,
            retry_period: self.leader_elect_retry_period,
            release_on_cancel: true,
        }
    }
}

/// A group of loops started: its task, and whether the task still runs (what ComponentStatus
/// reports for the group's component, as kube-apiserver probes the component's `/healthz`).
pub(crate) struct Started {
    /// `controller-manager` or `scheduler`.
    pub(crate) component: &'static str,
    /// Ends after shutdown, with the first loop error.
    pub(crate) task: JoinHandle<Result<()>>,
    /// True until the task ends.
    pub(crate) running: Arc<AtomicBool>,
}

/// Clears a flag when dropped: when the task holding it ends, however it ends.
struct Running(Arc<AtomicBool>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// Spawns `work` with a flag that is true while it runs.
fn spawn_flagged(
    component: &'static str,
    work: impl std::future::Future<Output = Result<()>> + Send + 'static,
) -> Started {
    let running = Arc::new(AtomicBool::new(true));
    let flag = Running(running.clone());
    let task = tokio::spawn(async move {
        let _flag = flag;
        work.await
    });
    Started {
        component,
        task,
        running,
    }
}

/// Starts the loops of the `controllers` and `scheduler` roles that `selection` picks: each
/// group under its own Lease if `elect`, else directly. The tasks end after `shutdown` is
/// cancelled, with the first loop error.
pub(crate) fn start_loops(
    roles: &Roles,
    selection: &LoopSelection,
    term: Term,
    leader_elect: &LeaderElectArgs,
    elect: bool,
    identities: &Identities,
    shutdown: &CancellationToken,
) -> Result<Vec<Started>> {
    let mut groups = Vec::new();
    let pick = |scheduler: bool| -> Result<LoopSelection> {
        let names: Vec<&str> = selection
            .loops()
            .iter()
            .filter(|l| (**l == Loop::Scheduler) == scheduler)
            .map(|l| l.name())
            .collect();
        Ok(names.join(",").parse()?)
    };
    // Each group reads (informers) and holds its Lease as its component's user; the
    // controller manager's loops each write as their own ServiceAccount (identities.rs).
    if roles.has(Role::Controllers) {
        groups.push((
            "controller-manager",
            CONTROLLER_MANAGER_LEASE,
            pick(false)?,
            identities.controller_manager(),
            identities.loops(),
        ));
    }
    if roles.has(Role::Scheduler) {
        groups.push((
            "scheduler",
            SCHEDULER_LEASE,
            pick(true)?,
            identities.scheduler(),
            None,
        ));
    }
    let mut tasks = Vec::new();
    for (component, lease, loops, client, clients) in groups {
        if loops.loops().is_empty() {
            continue;
        }
        let shutdown = shutdown.clone();
        let Term { settings, metrics } = term.clone();
        if !elect {
            tasks.push(spawn_flagged(component, async move {
                let mut ctx = LoopContext::new(client)
                    .with_settings(settings)
                    .with_metrics(metrics);
                ctx.clients = clients;
                setpoint_controllers::run(ctx, &loops, shutdown)
                    .await
                    .map_err(anyhow::Error::from)
            }));
            continue;
        }
        let election = LeaderElection::new(
            client.clone(),
            LeaseLock::new(LEASE_NAMESPACE, lease),
            leader_elect.config(),
        )
        .with_context(|| format!("setting up leader election on Lease {lease}"))?;
        {
            let election = election.clone();
            metrics.add_leader_election(lease, move || election.is_leader());
        }
        tasks.push(spawn_flagged(
            component,
            run_elected(
                election,
                lease,
                client,
                loops,
                Term { settings, metrics },
                clients,
                shutdown,
            ),
        ));
    }
    Ok(tasks)
}

/// What the loops start with (each term of leadership, when electing).
#[derive(Clone)]
pub(crate) struct Term {
    /// Their tunables.
    pub(crate) settings: LoopSettings,
    /// Where they report.
    pub(crate) metrics: Metrics,
}

/// Campaigns for `lease` until `shutdown`, running `loops` whenever this process leads (each
/// writing with the client `clients` makes for it, if set).
async fn run_elected(
    election: LeaderElection,
    lease: &'static str,
    client: Client,
    loops: LoopSelection,
    term: Term,
    clients: Option<LoopClients>,
    shutdown: CancellationToken,
) -> Result<()> {
    {
        let election = election.clone();
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            shutdown.cancelled().await;
            election.stop();
        });
    }
    tracing::info!(lease, identity = %election.identity(), "campaigning for leadership");
    loop {
        let end = election
            .run(|leading| {
                let client = client.clone();
                let loops = loops.clone();
                let shutdown = shutdown.clone();
                let term = term.clone();
                let clients = clients.clone();
                async move {
                    tracing::info!(lease, "became leader; starting the loops");
                    let mut ctx = LoopContext::new(client)
                        .with_settings(term.settings)
                        .with_metrics(term.metrics);
                    ctx.clients = clients;
                    // A term's informers end with it, also when the work is dropped.
                    let _factory = FactoryGuard(ctx.factory.clone());
                    let stop = shutdown.child_token();
                    let work = setpoint_controllers::run(ctx, &loops, stop.clone());
                    tokio::pin!(work);
                    tokio::select! {
                        result = &mut work => result,
                        () = leading.lost() => {
                            tracing::info!(lease, "leadership ends; stopping the loops");
                            stop.cancel();
                            work.await
                        }
                    }
                }
            })
            .await
            .with_context(|| format!("leader election on Lease {lease}"))?;
        match end {
            ElectionEnd::NeverLed => return Ok(()),
            ElectionEnd::Finished(result) => {
                tracing::info!(lease, "stopped leading");
                return result.map_err(anyhow::Error::from);
            }
            ElectionEnd::Lost(_) => {
                tracing::warn!(
                    lease,
                    "lost the Lease; the loops stopped, campaigning again"
                );
                if shutdown.is_cancelled() {
                    return Ok(());
                }
            }
        }
    }
}

/// Shuts an informer factory down when dropped.
struct FactoryGuard(setpoint_runtime::InformerFactory);

impl Drop for FactoryGuard {
    fn drop(&mut self) {
        self.0.shut_down();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_should_parse_and_refuse_unknown_or_empty() {
        let roles: Roles = "scheduler, apiserver".parse().expect("parses");
        assert!(roles.has(Role::Apiserver) && roles.has(Role::Scheduler));
        assert!(!roles.has(Role::Controllers) && !roles.has(Role::Agent));
        assert!("apiserver,kubelet"
            .parse::<Roles>()
            .expect_err("unknown")
            .contains("kubelet"));
        assert!(",".parse::<Roles>().is_err());
    }

    #[test]
    fn identity_should_name_the_process() {
        let args = LeaderElectArgs {
            leader_elect: None,
            leader_elect_lease_duration: Duration::from_secs(15),
            leader_elect_renew_deadline: Duration::from_secs(10),
            leader_elect_retry_period: Duration::from_secs(2),
        };
        let config = args.config();
        assert!(
            config
                .identity
                .contains(&format!("_{}_", std::process::id())),
            "{}",
            config.identity
        );
        config.validate().expect("the defaults are valid");
        assert!(args.enabled(false) && !args.enabled(true));
        let forced = LeaderElectArgs {
            leader_elect: Some(true),
            ..args
        };
        assert!(forced.enabled(true));
    }
}
