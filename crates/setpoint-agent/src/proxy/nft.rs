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
fn program() -> String {
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
    run(&format!("add table ip {table}\ndelete table ip {table}\n"), false).await
}
