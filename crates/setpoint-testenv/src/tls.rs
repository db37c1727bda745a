//! Certificates and TLS client settings for tests: a throwaway [`TestCa`] that issues client
//! certificates, a rustls client configuration trusting a CA ([`client_config`]), and one
//! that accepts any server certificate ([`client_config_for_any_server`], for endpoints that
//! serve a self-signed certificate, as the node agent does). All on the ring provider, as the
//! server is.

use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{
    ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme, SupportedProtocolVersion,
};

/// A certificate authority made for one test: a self-signed CA certificate and its key.
pub struct TestCa {
    certificate_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

/// A certificate and its private key, both PEM.
#[derive(Clone, Debug)]
pub struct Identity {
    /// The certificate, PEM.
    pub certificate_pem: String,
    /// Its private key (PKCS#8), PEM.
    pub key_pem: String,
}

impl TestCa {
    /// A new CA with a fresh key. Panics if rcgen cannot make one (a test failure).
    #[allow(clippy::new_without_default)] // each call makes a different CA
    pub fn new() -> TestCa {
        let key = KeyPair::generate().expect("a CA key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let certificate = params.self_signed(&key).expect("a self-signed CA");
        TestCa {
            certificate_pem: certificate.pem(),
            issuer: Issuer::new(params, key),
        }
    }

    /// The CA's certificate, PEM (what a server that checks client certificates trusts).
    pub fn certificate_pem(&self) -> &str {
        &self.certificate_pem
    }

    /// A new client certificate (extended key usage: client authentication) issued by this CA
    /// for what the API server presents to node agents: the user
    /// `kube-apiserver-kubelet-client` in the group `system:masters`.
    pub fn client_identity(&self) -> Identity {
        self.client_identity_as("kube-apiserver-kubelet-client", Some("system:masters"))
    }

    /// A new client certificate issued by this CA for the user `name` (its common name) in
    /// `group` (its organization; rcgen writes one value per attribute).
    pub fn client_identity_as(&self, name: &str, group: Option<&str>) -> Identity {
        let key = KeyPair::generate().expect("a client key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("parameters");
        params.distinguished_name = rcgen::DistinguishedName::new();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        if let Some(group) = group {
            params
                .distinguished_name
                .push(rcgen::DnType::OrganizationName, group);
        }
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let certificate = params
            .signed_by(&key, &self.issuer)
            .expect("a client certificate");
        Identity {
            certificate_pem: certificate.pem(),
            key_pem: key.serialize_pem(),
        }
    }
}

impl TestCa {
    /// A new serving certificate for `names` (DNS names, or IP addresses such as
    /// `127.0.0.1`) issued by this CA: for test servers a client must verify (an admission
    /// webhook trusting the CA through its `caBundle`).
    pub fn server_identity(&self, names: &[&str]) -> Identity {
        let key = KeyPair::generate().expect("a server key");
        let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        let mut params = CertificateParams::new(names).expect("parameters");
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let certificate = params
            .signed_by(&key, &self.issuer)
            .expect("a server certificate");
        Identity {
            certificate_pem: certificate.pem(),
            key_pem: key.serialize_pem(),
        }
    }
}

fn certificate_der(pem: &str) -> CertificateDer<'static> {
    CertificateDer::from_pem_slice(pem.as_bytes()).expect("a certificate")
}

fn key_der(pem: &str) -> PrivateKeyDer<'static> {
    PrivateKeyDer::from_pem_slice(pem.as_bytes()).expect("a private key")
}

/// A root store holding the CA certificate `ca_pem`.
pub fn root_store(ca_pem: &str) -> RootCertStore {
    let mut roots = RootCertStore::empty();
    roots
        .add(certificate_der(ca_pem))
        .expect("a CA certificate rustls accepts");
    roots
}

/// A client configuration trusting the CA `ca_pem`, speaking `versions`, offering `alpn`, and
/// presenting `identity` (certificate PEM, key PEM) if given.
pub fn client_config(
    ca_pem: &str,
    identity: Option<(&str, &str)>,
    alpn: &[&[u8]],
    versions: &[&'static SupportedProtocolVersion],
) -> Arc<ClientConfig> {
    let builder = ClientConfig::builder_with_provider(ring())
        .with_protocol_versions(versions)
        .expect("protocol versions")
        .with_root_certificates(root_store(ca_pem));
    let mut config = match identity {
        Some((certificate, key)) => builder
            .with_client_auth_cert(vec![certificate_der(certificate)], key_der(key))
            .expect("a client certificate"),
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = alpn.iter().map(|protocol| protocol.to_vec()).collect();
    Arc::new(config)
}

/// A client configuration (default protocol versions) that presents `identity` if given and
/// accepts any server certificate: for endpoints serving a self-signed certificate.
pub fn client_config_for_any_server(identity: Option<&Identity>) -> ClientConfig {
    let provider = ring();
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyServer(provider)));
    match identity {
        Some(identity) => builder
            .with_client_auth_cert(
                vec![certificate_der(&identity.certificate_pem)],
                key_der(&identity.key_pem),
            )
            .expect("a client certificate"),
        None => builder.with_no_client_auth(),
    }
}

fn ring() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Accepts any server certificate; still checks the handshake's signatures.
#[derive(Debug)]
struct AnyServer(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyServer {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
