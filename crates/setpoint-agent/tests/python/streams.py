"""The Python `kubernetes` client's exec and port-forward against the agent's stream
protocols (src/streams/kubectl_tests.rs serves them behind a minimal API server).

Usage: streams.py SERVER_URL ECHO_PORT. Asserts what it checks; exits non-zero on failure.
"""
import sys

from kubernetes import client
from kubernetes.stream import portforward, stream

server, echo_port = sys.argv[1], int(sys.argv[2])
configuration = client.Configuration()
configuration.host = server
api = client.CoreV1Api(client.ApiClient(configuration))

# Exec over WebSocket (the client offers v5 then v4; we pick v5): stdin, its CLOSE, the
# output channels and the exit code from the Status on the error channel.
resp = stream(api.connect_get_namespaced_pod_exec, "p", "default", command=["cat"],
              stdin=True, stdout=True, stderr=True, tty=False, _preload_content=False)
assert resp.subprotocol == "v5.channel.k8s.io", resp.subprotocol
resp.write_stdin("from python\n")
resp.close_channel(0)
resp.run_forever(timeout=30)
out, err = resp.read_stdout(), resp.read_stderr()
assert out == "from python\n", repr(out)
assert err == "err", repr(err)
assert resp.returncode == 3, resp.returncode
resp.close()

# Port-forward over WebSocket (v4 channels, the 2-byte port prefix on both channels).
pf = portforward(api.connect_get_namespaced_pod_portforward, "p", "default",
                 ports=str(echo_port))
sock = pf.socket(echo_port)
sock.setblocking(True)
payload = bytes(range(256)) * 4096  # 1 MiB
sock.sendall(payload)
received = bytearray()
while len(received) < len(payload):
    chunk = sock.recv(65536)
    assert chunk, "connection ended early"
    received.extend(chunk)
assert bytes(received) == payload
assert pf.error(echo_port) is None, pf.error(echo_port)
sock.close()
pf.close()
print("ok")
