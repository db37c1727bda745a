//! `setpoint server`'s audit log flags (kube-apiserver's names): the policy, where the log
//! goes and how it is rotated, and how to turn it off. On by default: `DATA_DIR/audit/audit.log`
//! with the built-in policy (docs/design/audit.md).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::Args;
use setpoint_apiserver::{AuditConfig, AuditLog, AuditPolicy};

/// The audit log.
#[derive(Debug, Args)]
pub(crate) struct AuditArgs {
    /// The audit policy: a kube `audit.k8s.io/v1` Policy (YAML or JSON). Without it, the
    /// built-in policy: Metadata for every request except health checks, discovery, events,
    /// heartbeats and the components' reads (none); never a request or response body.
    #[arg(long, value_name = "FILE")]
    pub(crate) audit_policy_file: Option<PathBuf>,
    /// Where audit events go, one JSON line each: a file (default `DATA_DIR/audit/audit.log`,
    /// mode 0600), `-` for standard output, or `""` for nowhere (the audit log off).
    #[arg(long, value_name = "FILE")]
    pub(crate) audit_log_path: Option<String>,
    /// The largest the audit log may grow, in megabytes, before it is rotated (renamed
    /// `audit-<UTC time>.log`); 0: never rotated.
    #[arg(long, value_name = "MB", default_value_t = 100)]
    pub(crate) audit_log_maxsize: u64,
    /// How many days rotated audit logs are kept; 0: no limit.
    #[arg(long, value_name = "DAYS", default_value_t = 0)]
    pub(crate) audit_log_maxage: u64,
    /// How many rotated audit logs are kept; 0: all.
    #[arg(long, value_name = "COUNT", default_value_t = 10)]
    pub(crate) audit_log_maxbackup: usize,
    /// Keep no audit log (as `--audit-log-path ""`).
    #[arg(long, conflicts_with_all = ["audit_log_path", "audit_policy_file"])]
    pub(crate) no_audit: bool,
}

impl AuditArgs {
    /// The audit log these flags ask for, `None` when it is off; fails on a bad policy file.
    pub(crate) fn config(&self, data_dir: &Path) -> Result<Option<AuditConfig>> {
        if self.no_audit {
            return Ok(None);
        }
        let log = match self.audit_log_path.as_deref() {
            Some("") => return Ok(None),
            Some("-") => AuditLog::Stdout,
            Some(path) => AuditLog::File(PathBuf::from(path)),
            None => AuditLog::File(data_dir.join("audit").join("audit.log")),
        };
        let policy = match &self.audit_policy_file {
            Some(path) => AuditPolicy::load(path).context("--audit-policy-file")?,
            None => AuditPolicy::default_policy(),
        };
        let mut config = AuditConfig::new(policy, log);
        config.max_size_bytes = self
            .audit_log_maxsize
            .saturating_mul(setpoint_apiserver::AUDIT_MEGABYTE);
        config.max_age_days = self.audit_log_maxage;
        config.max_backups = self.audit_log_maxbackup;
        Ok(Some(config))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser as _;

    fn config(args: &[&str]) -> Result<Option<AuditConfig>> {
        let cli = crate::cli::Cli::try_parse_from(
            ["setpoint", "server", "--data-dir", "/d"]
                .iter()
                .chain(args),
        )?;
        let crate::cli::Command::Server(server) = cli.command else {
            anyhow::bail!("not the server subcommand");
        };
        server.audit.config(Path::new("/d"))
    }

    #[test]
    fn the_audit_log_should_be_on_by_default_and_turned_off_by_an_empty_path() -> Result<()> {
        let default = config(&[])?.context("on by default")?;
        assert_eq!(
            default.log,
            AuditLog::File(PathBuf::from("/d/audit/audit.log"))
        );
        assert_eq!(
            default.max_size_bytes,
            100 * setpoint_apiserver::AUDIT_MEGABYTE
        );
        assert_eq!(default.max_backups, 10);
        assert_eq!(
            config(&["--audit-log-path=-"])?.context("stdout")?.log,
            AuditLog::Stdout
        );
        let sized = config(&[
            "--audit-log-maxsize",
            "1",
            "--audit-log-maxbackup",
            "3",
            "--audit-log-maxage",
            "7",
        ])?
        .context("on")?;
        assert_eq!(
            (sized.max_size_bytes, sized.max_backups, sized.max_age_days),
            (setpoint_apiserver::AUDIT_MEGABYTE, 3, 7)
        );
        assert!(config(&["--audit-log-path="])?.is_none());
        assert!(config(&["--no-audit"])?.is_none());
        assert!(config(&["--no-audit", "--audit-log-path=x"]).is_err());
        Ok(())
    }
}
