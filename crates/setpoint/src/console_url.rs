//! `setpoint console-url --data-dir DIR [--user NAME] [--group G]…`: a login URL for the web
//! console (docs/console.md). The server mints the one-time token (`POST /ui/api/login-tokens`)
//! for the user this command impersonates with the admin kubeconfig `DIR/admin.kubeconfig` —
//! the admin itself by default — so only someone who can read that kubeconfig (or another
//! caller allowed to impersonate) gets a URL. The token is good once, for five minutes.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _, Result};
use clap::Args;

/// The user and groups the admin kubeconfig's certificate stands for.
const ADMIN_USER: &str = "setpoint-admin";
const ADMIN_GROUP: &str = "system:masters";

/// Flags of `setpoint console-url`.
#[derive(Debug, Args)]
pub(crate) struct ConsoleUrlArgs {
    /// The server's data directory (its `admin.kubeconfig` is used to mint the token).
    #[arg(long, value_name = "DIR")]
    data_dir: PathBuf,
    /// Log in as this user (default: the admin, `setpoint-admin` in `system:masters`).
    #[arg(long, value_name = "NAME")]
    user: Option<String>,
    /// A group of that user; repeat for several (only with --user).
    #[arg(long = "group", value_name = "GROUP", requires = "user")]
    groups: Vec<String>,
}

/// Prints the login URL.
pub(crate) async fn console_url(args: ConsoleUrlArgs) -> Result<()> {
    let user = match args.user {
        Some(user) if user.is_empty() => bail!("--user must not be empty"),
        Some(user) => Some((user, args.groups)),
        None => None,
    };
    println!("{}", login_url(&args.data_dir, user).await?);
    Ok(())
}

/// A one-time login URL for `user` and its groups (the admin when `None`), minted by the server
/// whose data directory is `data_dir`.
pub(crate) async fn login_url(
    data_dir: &Path,
    user: Option<(String, Vec<String>)>,
) -> Result<String> {
    let path = data_dir.join(setpoint_apiserver::ADMIN_KUBECONFIG);
    let kubeconfig = kube::config::Kubeconfig::read_from(&path).with_context(|| {
        format!(
            "cannot read {} (is DIR the data directory of a `setpoint server`?)",
            path.display()
        )
    })?;
    let mut config = kube::Config::from_custom_kubeconfig(
        kubeconfig,
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .with_context(|| format!("cannot use {}", path.display()))?;
    let (user, groups) =
        user.unwrap_or_else(|| (ADMIN_USER.to_owned(), vec![ADMIN_GROUP.to_owned()]));
    config.auth_info.impersonate = Some(user.clone());
    config.auth_info.impersonate_groups = (!groups.is_empty()).then_some(groups);
    let server = config.cluster_url.to_string();
    let client = kube::Client::try_from(config).context("cannot make a client")?;
    let request = http::Request::post("/ui/api/login-tokens")
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(b"{}".to_vec())?;
    let answer = client
        .request_text(request)
        .await
        .map_err(|error| match error {
            kube::Error::Api(status) => {
                anyhow::anyhow!(
                    "the server refused to mint a login token for {user:?}: {}",
                    status.message
                )
            }
            other => anyhow::anyhow!("cannot reach the server at {server}: {other}"),
        })?;
    let answer: serde_json::Value =
        serde_json::from_str(&answer).context("the server's answer is not JSON")?;
    let Some(login) = answer["path"].as_str() else {
        bail!("the server's answer has no login path: {answer}");
    };
    Ok(format!("{}{login}", server.trim_end_matches('/')))
}
