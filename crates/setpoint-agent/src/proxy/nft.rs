//! Running `nft`: one `nft -f -` transaction per sync (atomic: all of it or nothing), `-c`
//! to check a ruleset without applying it, and whether the binary is there at all.

use std::process::Stdio;

use tokio::io::AsyncWriteExt;
use tokio::process::Command;

/// Why `nft` failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum NftError {
    /// `nft` could not be started or fed.
    #[error("running nft: {0}")]
    Spawn(#[from] std::io::Error),
    /// `nft` refused the transaction.
    #[error("nft refused the ruleset: {0}")]
    Refused(String),
}

/// The program to run (`SETPOINT_NFT` overrides, for tests and odd installs).
pub(crate) fn program() -> String {
    std::env::var("SETPOINT_NFT").unwrap_or_else(|_| "nft".to_owned())
}

/// Whether `nft --version` runs.
pub(crate) async fn available() -> bool {
    Command::new(program())
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .await
        .is_ok_and(|s| s.success())
}

/// Applies `script` as one transaction (`check`: only checks it, `nft -c`).
pub(crate) async fn run(script: &str, check: bool) -> Result<(), NftError> {
    let mut command = Command::new(program());
    if check {
        command.arg("-c");
    }
    let mut child = command
        .args(["-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(script.as_bytes()).await?;
        stdin.shutdown().await?;
    }
    let output = child.wait_with_output().await?;
    if output.status.success() {
        Ok(())
    } else {
        let stderr = String::from_utf8_lossy(&output.stderr);
        // The first lines say what and where; a full ruleset echo would flood the log.
        let head: Vec<&str> = stderr.lines().take(6).collect();
        Err(NftError::Refused(head.join("\n")))
    }
}

/// Deletes the agent's table, if there is one.
pub(crate) async fn delete_table(table: &str) -> Result<(), NftError> {
    run(
        &format!("add table ip {table}\ndelete table ip {table}\n"),
        false,
    )
    .await
}

/// Where agents record which root directory each of their tables belongs to (a tmpfs: it goes
/// at reboot, as the tables do), so a later agent can delete the tables of agents that were
/// killed and whose root directory is gone (test servers in temporary directories).
const REGISTRY: &str = "/run/setpoint/nft-tables";

/// Records that `table` belongs to the agent of `root_dir`.
pub(crate) fn register(table: &str, root_dir: &std::path::Path) {
    let dir = std::path::Path::new(REGISTRY);
    let written = std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::write(dir.join(table), root_dir.as_os_str().as_encoded_bytes()));
    if let Err(e) = written {
        tracing::debug!(error = %e, "recording the Service table's owner");
    }
}

/// Forgets `table` (deleted by its agent).
pub(crate) fn unregister(table: &str) {
    let _ = std::fs::remove_file(std::path::Path::new(REGISTRY).join(table));
}

/// Deletes the registered tables whose root directory no longer exists; returns their names.
pub(crate) async fn sweep_stale() -> Vec<String> {
    let mut swept = Vec::new();
    let Ok(entries) = std::fs::read_dir(REGISTRY) else {
        return swept;
    };
    for entry in entries.flatten() {
        let Some(table) = entry.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        let Ok(root) = std::fs::read_to_string(entry.path()) else {
            continue;
        };
        if std::path::Path::new(&root).exists() {
            continue;
        }
        let _ = delete_table(&table).await;
        unregister(&table);
        swept.push(table);
    }
    swept
}
