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
    let on = with_server(&root.join("locks-on"), Locks::On, true, harness.sizes).await?;
    let off = with_server(&root.join("locks-off"), Locks::Off, true, harness.sizes).await?;
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

/// Starts a server in `root` with `locks` (and kube-apiserver's seats when `kube_seats`), runs
/// the creates against it and stops it.
async fn with_server(
    root: &Path,
    locks: Locks,
    kube_seats: bool,
    sizes: load::Sizes,
) -> Result<(u64, Duration)> {
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
    let ran = async {
        let admin = Client::new(endpoint)?;
        super::wait_ready(&admin).await?;
        let client = match locks {
            Locks::Off => admin,
            Locks::On => editor(root, &admin).await?,
        };
        creates(&client, sizes).await
    }
    .await
    .with_context(|| server.log_tail());
    server.stop().await?;
    ran
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
