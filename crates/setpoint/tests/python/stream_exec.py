"""The Python `kubernetes` client's `stream()` exec against a Setpoint server (WebSocket channel
protocol through the API server to the node agent): output of a command run in the pod's
environment, and a non-zero exit code. Usage: stream_exec.py KUBECONFIG POD"""

import sys

from kubernetes import client, config
from kubernetes.stream import stream

config.load_kube_config(config_file=sys.argv[1])
v1 = client.CoreV1Api()
pod = sys.argv[2]

out = stream(
    v1.connect_get_namespaced_pod_exec,
    pod,
    "default",
    command=["sh", "-c", "echo $GREETING"],
    stderr=True,
    stdin=False,
    stdout=True,
    tty=False,
)
assert out == "hello-from-the-pod\n", repr(out)

resp = stream(
    v1.connect_get_namespaced_pod_exec,
    pod,
    "default",
    command=["sh", "-c", "read l; echo got:$l; exit 3"],
    stderr=True,
    stdin=True,
    stdout=True,
    tty=False,
    _preload_content=False,
)
# A str goes out as a text frame, read like binary data (as the kubelet does).
resp.write_stdin("py\n")
resp.run_forever(timeout=60)
got = resp.read_stdout(timeout=10)
assert got == "got:py\n", repr(got)
assert resp.returncode == 3, resp.returncode
print("ok")
