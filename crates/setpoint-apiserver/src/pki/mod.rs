//! The cluster's credentials in `DATA_DIR/pki`, and the admin kubeconfig made from them:
//! created at first start, reused on every later one. [`Pki`] documents the files and when
//! they are re-issued.

mod files;
mod inspect;
mod issue;
pub(crate) mod sa_key;
mod token;

use std::fmt;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

use rcgen::{Issuer, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use time::{Duration, OffsetDateTime};

pub(crate) use self::inspect::{common_names, organizations, parse as parse_certificate};
use self::inspect::{LeafRequirements, Unusable};
use self::issue::Issued;
pub(crate) use self::issue::{ADMIN_COMMON_NAME, ADMIN_ORGANIZATION};
pub(crate) use self::token::BearerToken;

/// Name of the admin kubeconfig in the data directory.
pub const ADMIN_KUBECONFIG: &str = "admin.kubeconfig";
/// Serving and admin certificates expiring sooner than this are re-issued at start.
const RENEW_BEFORE: Duration = Duration::days(30);
/// Common name of the serving certificate.
const SERVING_COMMON_NAME: &str = "setpoint-apiserver";
/// Common name of the front-proxy CA.
const FRONT_PROXY_CA_COMMON_NAME: &str = "setpoint-front-proxy-ca";
/// Common name of the front-proxy client certificate: what aggregated API servers are told to
/// accept (`requestheader-allowed-names`), kube's name for it.
pub(crate) const FRONT_PROXY_CLIENT_COMMON_NAME: &str = "front-proxy-client";

/// Failure to load or create the cluster's credentials.
#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    /// A directory could not be created or secured.
    #[error("cannot create directory {path}")]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// A file could not be read.
    #[error("cannot read {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// A file could not be written or its mode set.
    #[error("cannot write {path}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// The CA certificate exists but its key does not.
    #[error("found the CA certificate {cert} but not its key {key}: restore the key, or remove both to create a new CA (every existing kubeconfig then stops working)")]
    CaKeyMissing {
        /// The CA certificate.
        cert: PathBuf,
        /// The missing key.
        key: PathBuf,
    },
    /// The CA on disk cannot sign.
    #[error("the CA in {cert} cannot be used ({reason}): remove {cert} and its key to create a new CA (every existing kubeconfig then stops working)")]
    UnusableCa {
        /// The CA certificate.
        cert: PathBuf,
        /// Why, in words.
        reason: String,
    },
    /// The token file holds no usable token.
    #[error("{path} does not hold a token of at least {min} printable characters: fix or remove it", min = token::MIN_TOKEN_LEN)]
    InvalidToken {
        /// The token file.
        path: PathBuf,
    },
    /// The ServiceAccount signing key file holds no usable P-256 PKCS #8 key.
    #[error("{path} does not hold a usable ECDSA P-256 private key (PKCS #8 PEM): fix or remove it (every ServiceAccount token then stops working)")]
    InvalidKey {
        /// The key file.
        path: PathBuf,
    },
    /// A certificate could not be generated or signed.
    #[error("cannot issue a certificate")]
    Issue(#[from] rcgen::Error),
}

/// Result of PKI operations.
pub(crate) type Result<T, E = PkiError> = std::result::Result<T, E>;

/// The cluster's credentials, kept in `DATA_DIR/pki` (mode `0700`), loaded from (and, where
/// missing, created in) a data directory. The CA's private key is not kept in memory once
/// loading is done.
///
/// | file | what | mode |
/// |---|---|---|
/// | `ca.crt`, `ca.key` | the cluster CA, `CN=setpoint-ca`, ECDSA P-256, valid ten years | `0644`, `0600` |
/// | `server.crt`, `server.key` | the serving certificate, valid one year | `0644`, `0600` |
/// | `admin.crt`, `admin.key` | the admin client certificate (`CN=setpoint-admin`, `O=system:masters`), valid one year | `0644`, `0600` |
/// | `admin.token` | the admin bearer token, 32 random bytes in base64url | `0600` |
/// | `front-proxy-ca.crt`, `front-proxy-ca.key` | the front-proxy CA, `CN=setpoint-front-proxy-ca`, valid ten years | `0644`, `0600` |
/// | `front-proxy-client.crt`, `front-proxy-client.key` | the client certificate requests proxied to aggregated API servers present (`CN=front-proxy-client`), valid one year | `0644`, `0600` |
/// | `sa.key`, `sa.pub` | the ServiceAccount token signing key (ECDSA P-256, PKCS #8) and its public key | `0600`, `0644` |
///
/// [`Pki::load_or_create`] creates what is missing and reuses what is there, so a restart keeps
/// every credential a client may hold. It re-issues a serving or admin certificate, from the
/// same CA, when that certificate is missing, does not match its key, was not issued by the CA,
/// expires within 30 days, or (for the serving certificate) does not cover the listen address;
/// kubeconfigs keep working because they trust the CA, not the certificate. The CA itself is
/// never replaced once `ca.crt` exists: an expired or damaged CA is an error that names the
/// files to remove. Secret files found with looser modes are tightened to `0600`.
pub struct Pki {
    /// The data directory; the credentials are in its `pki` subdirectory.
    data_dir: PathBuf,
    /// The CA certificate, PEM, as clients are given it.
    ca_pem: String,
    /// The CA certificate, DER; it verifies client certificates.
    ca_der: CertificateDer<'static>,
    /// The serving certificate, DER; issued by `ca_der` and matching `serving_key`.
    serving_cert: CertificateDer<'static>,
    /// The serving certificate's PKCS #8 key.
    serving_key: PrivatePkcs8KeyDer<'static>,
    /// The admin client certificate, PEM; issued by `ca_der`.
    admin_cert_pem: String,
    /// The admin client certificate's key, PEM.
    admin_key_pem: String,
    /// The admin bearer token.
    token: BearerToken,
    /// The front-proxy CA certificate, PEM: aggregated API servers trust the identity headers
    /// of requests presenting a certificate it issued.
    front_proxy_ca_pem: String,
    /// The front-proxy client certificate, PEM; issued by the front-proxy CA.
    front_proxy_cert_pem: String,
    /// The front-proxy client certificate's key, PEM.
    front_proxy_key_pem: String,
    /// The ServiceAccount token signing key, PKCS #8 DER (`sa_key.rs`).
    service_account_key: Vec<u8>,
}

impl Pki {
    /// Loads the credentials in `data_dir/pki`, creating or re-issuing what is missing or
    /// unusable (see [`Pki`]) so that the serving certificate covers `listen`'s address.
    /// Creates `data_dir` with mode `0700` if it does not exist.
    ///
    /// Blocking: does file I/O and key generation; call it from `spawn_blocking` in async code.
    pub fn load_or_create(data_dir: &Path, listen: SocketAddr) -> Result<Self> {
        Self::load_or_create_at(data_dir, listen.ip(), OffsetDateTime::now_utc())
    }

    /// [`Pki::load_or_create`] as if the time were `now`.
    pub(crate) fn load_or_create_at(
        data_dir: &Path,
        listen: IpAddr,
        now: OffsetDateTime,
    ) -> Result<Self> {
        let create_dir = |path: &Path, tighten| {
            files::ensure_private_dir(path, tighten).map_err(|source| PkiError::CreateDir {
                path: path.to_owned(),
                source,
            })
        };
        create_dir(data_dir, false)?;
        let dir = data_dir.join("pki");
        create_dir(&dir, true)?;

        let (ca_pem, ca_der, ca) = load_or_create_ca(&dir, "ca", issue::CA_COMMON_NAME, now)?;
        let names = issue::serving_names(listen);
        let serving = load_or_issue_leaf(
            &dir,
            "server",
            &ca_der,
            &LeafRequirements {
                common_name: SERVING_COMMON_NAME,
                names: &names,
                renew_before: RENEW_BEFORE,
            },
            now,
            || issue::serving_certificate(&ca, &names, now),
        )?;
        let admin = load_or_issue_leaf(
            &dir,
            "admin",
            &ca_der,
            &LeafRequirements {
                common_name: ADMIN_COMMON_NAME,
                names: &[],
                renew_before: RENEW_BEFORE,
            },
            now,
            || issue::admin_certificate(&ca, now),
        )?;
        let token = load_or_create_token(&dir.join("admin.token"))?;
        let (front_proxy_ca_pem, front_proxy_ca_der, front_proxy_ca) =
            load_or_create_ca(&dir, "front-proxy-ca", FRONT_PROXY_CA_COMMON_NAME, now)?;
        let front_proxy = load_or_issue_leaf(
            &dir,
            "front-proxy-client",
            &front_proxy_ca_der,
            &LeafRequirements {
                common_name: FRONT_PROXY_CLIENT_COMMON_NAME,
                names: &[],
                renew_before: RENEW_BEFORE,
            },
            now,
            || issue::client_certificate(&front_proxy_ca, FRONT_PROXY_CLIENT_COMMON_NAME, now),
        )?;
        let service_account_key = sa_key::load_or_create(&dir)?;
        Ok(Self {
            service_account_key,
            data_dir: data_dir.to_owned(),
            ca_pem,
            ca_der,
            serving_cert: serving.cert_der,
            serving_key: PrivatePkcs8KeyDer::from(serving.key.serialize_der()),
            admin_cert_pem: admin.cert_pem,
            admin_key_pem: admin.key.serialize_pem(),
            token,
            front_proxy_ca_pem,
            front_proxy_cert_pem: front_proxy.cert_pem,
            front_proxy_key_pem: front_proxy.key.serialize_pem(),
        })
    }

    /// The directory holding the credentials (`data_dir/pki`).
    pub fn dir(&self) -> PathBuf {
        self.data_dir.join("pki")
    }

    /// Where the admin kubeconfig is written: `data_dir/admin.kubeconfig`.
    pub fn admin_kubeconfig_path(&self) -> PathBuf {
        self.data_dir.join(ADMIN_KUBECONFIG)
    }

    /// The CA certificate in PEM: what clients must trust.
    pub fn ca_certificate_pem(&self) -> &str {
        &self.ca_pem
    }

    /// The admin bearer token. A secret: whoever holds it is cluster admin.
    pub fn admin_token(&self) -> &str {
        self.token.expose()
    }

    /// The admin client certificate in PEM.
    pub fn admin_certificate_pem(&self) -> &str {
        &self.admin_cert_pem
    }

    /// The admin client certificate's private key in PEM. A secret, like the token.
    pub fn admin_key_pem(&self) -> &str {
        &self.admin_key_pem
    }

    /// The front-proxy CA certificate in PEM (`requestheader-client-ca-file`).
    pub(crate) fn front_proxy_ca_pem(&self) -> &str {
        &self.front_proxy_ca_pem
    }

    /// The front-proxy client certificate and its key, in PEM: presented on requests proxied
    /// to aggregated API servers.
    pub(crate) fn front_proxy_client(&self) -> (&str, &str) {
        (&self.front_proxy_cert_pem, &self.front_proxy_key_pem)
    }

    /// The CA certificate in DER.
    pub(crate) fn ca_der(&self) -> &CertificateDer<'static> {
        &self.ca_der
    }

    /// The serving certificate chain and its key, for the TLS server.
    pub(crate) fn serving_identity(
        &self,
    ) -> (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>) {
        (
            vec![self.serving_cert.clone()],
            PrivateKeyDer::Pkcs8(self.serving_key.clone_key()),
        )
    }

    /// The admin bearer token.
    pub(crate) fn token(&self) -> &BearerToken {
        &self.token
    }

    /// The ServiceAccount token signing key, PKCS #8 DER.
    pub(crate) fn service_account_key(&self) -> &[u8] {
        &self.service_account_key
    }

    /// Writes the admin kubeconfig (mode `0600`) for a server reachable at `server`, unless
    /// the file already holds exactly that; returns its path. A server on an unspecified
    /// address (`0.0.0.0`, `::`) is given its loopback address of the same family.
    ///
    /// Blocking: does file I/O.
    pub fn write_admin_kubeconfig(&self, server: SocketAddr) -> Result<PathBuf> {
        let path = self.admin_kubeconfig_path();
        let contents = crate::kubeconfig::render(&crate::kubeconfig::Credentials {
            server: crate::kubeconfig::server_url(server),
            ca_pem: &self.ca_pem,
            token: self.token.expose(),
            client_cert_pem: &self.admin_cert_pem,
            client_key_pem: &self.admin_key_pem,
        });
        if read(&path)?.as_deref() == Some(contents.as_str()) {
            tighten(&path)?;
        } else {
            write(&path, &contents, files::PRIVATE_FILE_MODE)?;
        }
        Ok(path)
    }
}

impl fmt::Debug for Pki {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pki")
            .field("data_dir", &self.data_dir)
            .finish_non_exhaustive()
    }
}

/// A leaf certificate as loaded or issued.
struct Leaf {
    cert_pem: String,
    cert_der: CertificateDer<'static>,
    key: KeyPair,
}

/// Loads the CA `stem.crt`/`stem.key` in `dir`, or creates it (named `common_name`).
fn load_or_create_ca(
    dir: &Path,
    stem: &str,
    common_name: &str,
    now: OffsetDateTime,
) -> Result<(String, CertificateDer<'static>, Issuer<'static, KeyPair>)> {
    let cert_path = dir.join(format!("{stem}.crt"));
    let key_path = dir.join(format!("{stem}.key"));
    let cert_pem = read(&cert_path)?;
    let key_pem = read(&key_path)?;
    let (cert_pem, der, key) = match (cert_pem, key_pem) {
        (Some(cert_pem), Some(key_pem)) => {
            let unusable = |reason: Unusable| PkiError::UnusableCa {
                cert: cert_path.clone(),
                reason: reason.to_string(),
            };
            let (der, key) = inspect::certificate_and_key(&cert_pem, &key_pem).map_err(unusable)?;
            inspect::check_ca(&der, now).map_err(unusable)?;
            tighten(&key_path)?;
            (cert_pem, der, key)
        }
        (Some(_), None) => {
            return Err(PkiError::CaKeyMissing {
                cert: cert_path,
                key: key_path,
            })
        }
        (None, stray_key) => {
            // Without `ca.crt` no client can trust this CA yet, so a lone key (left by a
            // crash between the two writes below) is safely replaced.
            if stray_key.is_some() {
                let key = key_path.display();
                tracing::warn!(%key, "replacing a CA key that has no certificate");
            }
            let Issued {
                cert_pem,
                cert_der,
                key,
            } = issue::certificate_authority_named(common_name, now)?;
            write(&key_path, &key.serialize_pem(), files::PRIVATE_FILE_MODE)?;
            write(&cert_path, &cert_pem, files::PUBLIC_FILE_MODE)?;
            tracing::info!(cert = %cert_path.display(), "created a CA");
            (cert_pem, cert_der, key)
        }
    };
    let issuer = Issuer::from_ca_cert_der(&der, key)?;
    Ok((cert_pem, der, issuer))
}

fn load_or_issue_leaf(
    dir: &Path,
    stem: &str,
    ca: &CertificateDer<'_>,
    required: &LeafRequirements<'_>,
    now: OffsetDateTime,
    issue: impl FnOnce() -> Result<Issued, rcgen::Error>,
) -> Result<Leaf> {
    let cert_path = dir.join(format!("{stem}.crt"));
    let key_path = dir.join(format!("{stem}.key"));
    let existing = match (read(&cert_path)?, read(&key_path)?) {
        (Some(cert_pem), Some(key_pem)) => inspect::certificate_and_key(&cert_pem, &key_pem)
            .and_then(|(der, key)| {
                inspect::check_leaf(&der, ca, required, now)?;
                Ok(Leaf {
                    cert_pem,
                    cert_der: der,
                    key,
                })
            }),
        _ => Err(Unusable::Missing),
    };
    match existing {
        Ok(leaf) => {
            tighten(&key_path)?;
            Ok(leaf)
        }
        Err(reason) => {
            let Issued {
                cert_pem,
                cert_der,
                key,
            } = issue()?;
            // Key first: a crash before the certificate is written leaves a mismatch, which the
            // next start repairs.
            write(&key_path, &key.serialize_pem(), files::PRIVATE_FILE_MODE)?;
            write(&cert_path, &cert_pem, files::PUBLIC_FILE_MODE)?;
            if reason != Unusable::Missing {
                tracing::info!(cert = %cert_path.display(), %reason, "re-issued certificate");
            }
            Ok(Leaf {
                cert_pem,
                cert_der,
                key,
            })
        }
    }
}

fn load_or_create_token(path: &Path) -> Result<BearerToken> {
    match read(path)? {
        Some(text) => {
            let token = BearerToken::parse(&text).ok_or_else(|| PkiError::InvalidToken {
                path: path.to_owned(),
            })?;
            tighten(path)?;
            Ok(token)
        }
        None => {
            let token = BearerToken::generate();
            write(
                path,
                &format!("{}\n", token.expose()),
                files::PRIVATE_FILE_MODE,
            )?;
            Ok(token)
        }
    }
}

fn read(path: &Path) -> Result<Option<String>> {
    files::read_optional(path).map_err(|source| PkiError::Read {
        path: path.to_owned(),
        source,
    })
}

fn write(path: &Path, contents: &str, mode: u32) -> Result<()> {
    files::write_atomically(path, contents.as_bytes(), mode).map_err(|source| PkiError::Write {
        path: path.to_owned(),
        source,
    })
}

/// Restricts an existing secret file to `0600`, warning when it was looser.
fn tighten(path: &Path) -> Result<()> {
    let changed = files::set_mode_if_looser(path, files::PRIVATE_FILE_MODE).map_err(|source| {
        PkiError::Write {
            path: path.to_owned(),
            source,
        }
    })?;
    if changed {
        tracing::warn!(file = %path.display(), "restricted a secret file to mode 0600");
    }
    Ok(())
}

#[cfg(test)]
mod tests;
