//! Creates with every lock on against every lock off, in one run: two servers started one
//! after the other with the same flags (the API alone: no loops, no node agent) but for
//! - **on**: a user without privileges of its own (a static bearer token, bound to the `edit`
//!   ClusterRole in `default` by a RoleBinding, so every request is decided by RBAC), an audit
//!   policy logging every request at `Metadata` into the data directory, and the default
//!   encryption configuration (Secrets sealed with AES-256-GCM);
//! - **off**: the admin (`system:masters`, which is allowed before RBAC is asked), `--no-audit`,
//!   and an identity-only encryption configuration (Secrets stored as they are).
//!
//! Authentication is on in both (a bearer token each), and so is API Priority and Fairness, with
//! kube-apiserver's default seats (`--max-requests-inflight=400
//! --max-mutating-requests-inflight=200`) in both: the admin's requests are exempt from APF and
//! the user's are not, and with Setpoint's smaller per-core defaults the user's level
//! (`global-default`, 10 seats on 2 cores) would cap its 32 concurrent creates at 10 — APF doing
//! its job, not a cost of the locks. A third server, every lock on with the default seats, shows
//! that cap as its own row. [`CLIENTS`](super::load::CLIENTS) clients `POST` 1 KiB Secrets over
//! HTTP/1.1; reports creates per second of each and the ratio (goal: on ≥ 80 % of off).
//!
//! The two servers of the comparison run side by side and take turns, [`ROUNDS`] rounds of a
//! third of the creates each (on, off; off, on; on, off), so that other work on the machine
//! weighs on both alike; each row sums its rounds.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context as _, Result};
use serde_json::json;
use tokio::process::Command;

use super::client::{Call, Client, Protocol};
use super::load;
use super::secrets::{creates, IDENTITY_ONLY};
use super::Harness;
use crate::bench::kubeconfig;
use crate::bench::report::{self, Row};
use crate::bench::server::ServerProcess;

/// An audit policy that logs every request's metadata.
const METADATA_POLICY: &str =
    "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n  - level: Metadata\n";
/// The user whose creates RBAC decides.
const USER: &str = "bench-editor";
/// How long the server may take to honour the token just added to its token file.
const TOKEN_TIMEOUT: Duration = Duration::from_secs(30);

/// How many turns each server of the comparison takes.
const ROUNDS: u64 = 3;
/// The Secrets' names of each round (a round's creates must not collide with the last's).
const ROUND_PREFIXES: [&str; ROUNDS as usize] = ["round1", "round2", "round3"];

/// kube-apiserver's default seats, for both servers of the comparison.
const KUBE_SEATS: [&str; 2] = [
    "--max-requests-inflight=400",
    "--max-mutating-requests-inflight=200",
];

/// Which locks a server runs with.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Locks {
    On,
    Off,
}

/// Runs the creates against a server with every lock on, then one with them off.
pub(super) async fn bench_locks(harness: &Harness, root: &Path) -> Result<Vec<Row>> {
    let (on, off) = side_by_side(root, harness.sizes).await?;
    let default_seats = with_server(
        &root.join("locks-on-default-seats"),
        Locks::On,
        false,
        harness.sizes,
    )
    .await?;
    let rate = |(ops, elapsed): (u64, Duration)| report::per_second(ops, elapsed);
    let describe = |(ops, elapsed): (u64, Duration)| {
        format!(
            "{} creates/s ({} in {:.2} s)",
            report::rate(ops, elapsed),
            report::count(ops),
            elapsed.as_secs_f64()
        )
    };
    let ratio = rate(on) as f64 / rate(off).max(1) as f64;
    let label = load::clients_label(Protocol::Http1);
    Ok(vec![
        Row::new(
            format!(
                "locks on: {label}, 1 KiB Secrets as an `edit` user (RBAC), audit at Metadata, \
                 encrypted (aesgcm); kube's seats"
            ),
            format!("{} — {:.0} % of off", describe(on), ratio * 100.0),
        )
        .target("≥ 80 % of off", ratio >= 0.8),
        Row::new(
            format!(
                "locks off: {label}, 1 KiB Secrets as system:masters, no audit, plaintext; \
                 kube's seats"
            ),
            describe(off),
        ),
        Row::new(
            format!(
                "locks on, Setpoint's default seats (the user's level: 10 on 2 cores): {label}"
            ),
            describe(default_seats),
        ),
    ])
}

/// The comparison: both servers (kube-apiserver's seats) started, then the creates in turns;
/// each side's creates and time summed over its rounds.
async fn side_by_side(
    root: &Path,
    sizes: load::Sizes,
) -> Result<((u64, Duration), (u64, Duration))> {
    let (on_server, on) = start(&root.join("locks-on"), Locks::On, true).await?;
    let off_started = start(&root.join("locks-off"), Locks::Off, true).await;
    let (off_server, off) = match off_started {
        Ok(started) => started,
        Err(error) => {
            on_server.stop().await?;
            return Err(error);
        }
    };
    let round = load::Sizes {
        creates: sizes.creates.div_ceil(ROUNDS),
        ..sizes
    };
    let ran = async {
        let mut totals = [(0_u64, Duration::ZERO); 2];
        for (i, prefix) in ROUND_PREFIXES.iter().enumerate() {
            let order = if i % 2 == 0 { [0, 1] } else { [1, 0] };
            for side in order {
                let client = if side == 0 { &on } else { &off };
                let (ops, elapsed) = super::secrets::creates_named(client, round, prefix).await?;
                totals[side].0 += ops;
                totals[side].1 += elapsed;
            }
        }
        Ok::<_, anyhow::Error>((totals[0], totals[1]))
    }
    .await
    .with_context(|| format!("{}\n{}", on_server.log_tail(), off_server.log_tail()));
    on_server.stop().await?;
    off_server.stop().await?;
    ran
}

/// Starts a server in `root` with `locks` (and kube-apiserver's seats when `kube_seats`), runs
/// the creates against it and stops it.
async fn with_server(
    root: &Path,
    locks: Locks,
    kube_seats: bool,
    sizes: load::Sizes,
) -> Result<(u64, Duration)> {
    let (server, client) = start(root, locks, kube_seats).await?;
    let ran = creates(&client, sizes)
        .await
        .with_context(|| server.log_tail());
    server.stop().await?;
    ran
}

/// Starts a server in `root` with `locks` (and kube-apiserver's seats when `kube_seats`); it and
/// the client of its side (the admin, or the `edit` user), once the server answers.
async fn start(root: &Path, locks: Locks, kube_seats: bool) -> Result<(ServerProcess, Client)> {
    std::fs::create_dir_all(root).with_context(|| format!("creating {}", root.display()))?;
    let mut args = vec!["--no-agent".to_owned(), "--controllers=".to_owned()];
    if kube_seats {
        args.extend(KUBE_SEATS.map(str::to_owned));
    }
    let (file, text, flag) = match locks {
        Locks::On => ("audit-policy.yaml", METADATA_POLICY, "--audit-policy-file"),
        Locks::Off => (
            "encryption-config.yaml",
            IDENTITY_ONLY,
            "--encryption-provider-config",
        ),
    };
    let path = root.join(file);
    std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    args.extend([flag.to_owned(), path.to_string_lossy().into_owned()]);
    if locks == Locks::Off {
        args.push("--no-audit".to_owned());
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (server, endpoint) = ServerProcess::start(root, &args).await?;
    let ready = async {
        let admin = Client::new(endpoint)?;
        super::wait_ready(&admin).await?;
        match locks {
            Locks::Off => Ok(admin),
            Locks::On => editor(root, &admin).await,
        }
    }
    .await
    .with_context(|| server.log_tail());
    match ready {
        Ok(client) => Ok((server, client)),
        Err(error) => {
            server.stop().await?;
            Err(error)
        }
    }
}

/// A client for [`USER`]: a token issued with `setpoint kubeconfig user --token`, bound to
/// `edit` in `default`; returns once the server accepts it.
async fn editor(root: &Path, admin: &Client) -> Result<Client> {
    let kubeconfig_path = root.join("editor.kubeconfig");
    let exe = std::env::current_exe().context("finding this executable")?;
    let status = Command::new(&exe)
        .args(["kubeconfig", "user", USER, "--token", "--data-dir"])
        .arg(root.join("data"))
        .arg("-o")
        .arg(&kubeconfig_path)
        .status()
        .await
        .context("running setpoint kubeconfig user")?;
    ensure!(
        status.success(),
        "setpoint kubeconfig user failed: {status}"
    );
    let text = std::fs::read_to_string(&kubeconfig_path)
        .with_context(|| format!("reading {}", kubeconfig_path.display()))?;
    let editor = Client::new(kubeconfig::parse(&text)?)?;

    let binding = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "bench-editor"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": USER}],
    });
    let mut connection = admin.connect(Protocol::Http1).await?;
    connection
        .call(Call::post_json(
            "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
            binding.to_string(),
        ))
        .await
        .context("binding the editor")?;

    // The token file is re-read when it changes: wait until the token (and the binding) work.
    let deadline = Instant::now() + TOKEN_TIMEOUT;
    loop {
        let attempt = async {
            let mut connection = editor.connect(Protocol::Http1).await?;
            connection
                .call(Call::get("/api/v1/namespaces/default/secrets?limit=1"))
                .await
        };
        match attempt.await {
            Ok(_) => return Ok(editor),
            Err(error) if Instant::now() >= deadline => {
                bail!("the editor's token is not accepted after {TOKEN_TIMEOUT:?}: {error:#}")
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}
