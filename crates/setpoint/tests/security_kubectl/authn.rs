//! Authentication flags of `setpoint server`, with real kubectl: `--service-account-issuer`,
//! `--api-audiences` and `--service-account-max-token-expiration` shape the tokens of
//! `kubectl create token`, which then authenticate (`kubectl auth whoami`); a
//! `--token-auth-file` user authenticates with `kubectl --token`; the admin is who
//! `kubectl auth whoami` says.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde_json::{json, Value};
use setpoint_testenv::process::Server;

fn claims(token: &str) -> Value {
    let payload = token.split('.').nth(1).unwrap();
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).unwrap()).unwrap()
}

fn whoami(server: &Server, token: Option<&str>) -> Value {
    let mut args = vec!["auth", "whoami", "-o", "json"];
    if let Some(token) = token {
        args.extend(["--token", token]);
    }
    let review: Value = serde_json::from_str(&server.ok(&args)).unwrap();
    review["status"]["userInfo"].clone()
}

#[test]
fn the_authentication_flags_should_shape_tokens_and_users() {
    let tmp = tempfile::tempdir().unwrap();
    let tokens = tmp.path().join("tokens.csv");
    std::fs::write(
        &tokens,
        "carol-token-0123456789abcdef0123456789,carol,42,team\n",
    )
    .unwrap();
    let server = Server::start_with(
        &tmp.path().join("data"),
        "127.0.0.1:0",
        &[
            "--no-agent",
            "--controllers=",
            "--service-account-issuer=https://issuer.example",
            "--service-account-issuer=https://old-issuer.example",
            "--api-audiences=api-a,api-b",
            "--service-account-max-token-expiration=20m",
            "--token-auth-file",
            tokens.to_str().unwrap(),
        ],
    );
    assert_eq!(whoami(&server, None)["username"], "setpoint-admin");
    let carol = whoami(&server, Some("carol-token-0123456789abcdef0123456789"));
    assert_eq!(
        carol,
        json!({"username": "carol", "uid": "42", "groups": ["team", "system:authenticated"]})
    );
    // The default DATA_DIR/pki/tokens.csv is not used when --token-auth-file names a file.
    assert!(server.dir.join("pki/sa.key").exists());

    server.ok(&["create", "serviceaccount", "builder"]);
    let out = server.kubectl(&["create", "token", "builder"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("requested expiration of 3600 seconds shortened to 1200 seconds"),
        "{stderr}"
    );
    let token = String::from_utf8(out.stdout).unwrap();
    let token = token.trim();
    let c = claims(token);
    assert_eq!(c["iss"], "https://issuer.example");
    assert_eq!(c["aud"], json!(["api-a", "api-b"]));
    assert_eq!(
        c["exp"].as_i64().unwrap() - c["iat"].as_i64().unwrap(),
        1200
    );
    let user = whoami(&server, Some(token));
    assert_eq!(user["username"], "system:serviceaccount:default:builder");

    let discovery: Value =
        serde_json::from_str(&server.ok(&["get", "--raw", "/.well-known/openid-configuration"]))
            .unwrap();
    assert_eq!(discovery["issuer"], "https://issuer.example");
    let wrong = server.kubectl(&["create", "token", "builder", "--audience", "elsewhere"]);
    let other = String::from_utf8(wrong.stdout).unwrap();
    let refused = server.kubectl(&["auth", "whoami", "--token", other.trim()]);
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("Unauthorized"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
}
