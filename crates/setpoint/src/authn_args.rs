//! The authentication flags of `setpoint server` (kube-apiserver's names): the ServiceAccount
//! token issuer(s), the API audiences, the longest token TokenRequest issues, and the static
//! token file. They become the API's [`AuthenticationConfig`].

use std::path::PathBuf;

use setpoint_apiserver::AuthenticationConfig;

/// The authentication flags.
#[derive(clap::Args, Debug, Clone, Default)]
pub(crate) struct AuthnArgs {
    /// The issuer (`iss`) of ServiceAccount tokens; repeat it to also accept tokens of former
    /// issuers (the first one signs). Default: `https://kubernetes.default.svc.cluster.local`.
    #[arg(long = "service-account-issuer", value_name = "URL")]
    pub(crate) service_account_issuers: Vec<String>,
    /// The audiences a token must name to be accepted by this server, comma-separated.
    /// Default: the first `--service-account-issuer`.
    #[arg(long, value_name = "AUDIENCE,...", value_delimiter = ',')]
    pub(crate) api_audiences: Vec<String>,
    /// The longest ServiceAccount token TokenRequest issues (longer requests are shortened,
    /// with a warning): `24h`, `90m`. Default: no limit.
    #[arg(long, value_name = "DURATION", value_parser = crate::cli::parse_duration)]
    pub(crate) service_account_max_token_expiration: Option<std::time::Duration>,
    /// The static token file: CSV lines `token,user,uid,"group1,group2"`, re-read when it
    /// changes. Default: `DATA_DIR/pki/tokens.csv` (used if it exists).
    #[arg(long, value_name = "FILE")]
    pub(crate) token_auth_file: Option<PathBuf>,
}

impl AuthnArgs {
    /// The API's authentication configuration.
    pub(crate) fn config(&self) -> AuthenticationConfig {
        AuthenticationConfig {
            service_account_issuers: self.service_account_issuers.clone(),
            api_audiences: self.api_audiences.clone(),
            service_account_max_token_expiration: self.service_account_max_token_expiration,
            token_auth_file: self.token_auth_file.clone(),
        }
    }
}
