//! The API server driven by the real `kubectl`: discovery, create/get in every output format,
//! label/annotate, the three patch types, apply twice, watch, delete with --wait, and the
//! errors users see.

use crate::common;

mod discovery;
mod objects;
mod watch_and_events;
mod workloads;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use common::{kubectl_version, Server};

const CONFIGMAP: &str =
    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c1, labels: {app: a}}\ndata: {a: \"1\"}\n";

const DEPLOYMENT: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: c, image: "nginx:1.25", ports: [{containerPort: 80}], env: [{name: A, value: "1"}]}
"#;
