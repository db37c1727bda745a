//! The Python `kubernetes` client (the version pinned in `scripts/check`, which installs it in
//! `target/pyvenv` and sets `SETPOINT_PYTHON`) against a server started here: the script
//! `tests/python/client_smoke.py` asserts what it checks and exits non-zero on any failure.

use crate::common;

use std::process::Command;

use common::Server;

#[test]
fn the_python_client_should_work_unmodified() {
    let Some(python) = std::env::var_os("SETPOINT_PYTHON") else {
        eprintln!("skipped: set SETPOINT_PYTHON to a Python with the `kubernetes` package (scripts/check does)");
        return;
    };
    let s = Server::start_api_only();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/client_smoke.py");
    let out = Command::new(python)
        .arg(script)
        .arg(s.kubeconfig())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
