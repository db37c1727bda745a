"""The Python `kubernetes` client against a Setpoint server: typed CRUD, a label-selected list,
a pod delete answered with the Pod (the typed client insists), the scale subresource, a watch
from a resourceVersion, and a 404. Usage: client_smoke.py KUBECONFIG"""

import sys
import threading
import time

from kubernetes import client, config, watch

config.load_kube_config(config_file=sys.argv[1])
v1 = client.CoreV1Api()
apps = client.AppsV1Api()

names = [n.metadata.name for n in v1.list_namespace().items]
assert "default" in names and "kube-system" in names, names

cm = client.V1ConfigMap(metadata=client.V1ObjectMeta(name="py", labels={"a": "b"}), data={"k": "v"})
created = v1.create_namespaced_config_map("default", cm)
assert int(created.metadata.resource_version) > 0
assert v1.read_namespaced_config_map("py", "default").data == {"k": "v"}
v1.patch_namespaced_config_map("py", "default", {"data": {"k2": "v2"}})
listed = v1.list_namespaced_config_map("default", label_selector="a=b").items
assert [c.metadata.name for c in listed] == ["py"], listed
assert listed[0].data == {"k": "v", "k2": "v2"}, listed[0].data

pod = client.V1Pod(
    metadata=client.V1ObjectMeta(name="p1"),
    spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="busybox")]),
)
assert v1.create_namespaced_pod("default", pod).status.phase == "Pending"
deleted = v1.delete_namespaced_pod("p1", "default")
assert isinstance(deleted, client.V1Pod), type(deleted)

deployment = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "web"},
    "spec": {
        "replicas": 1,
        "selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}},
    },
}
apps.create_namespaced_deployment("default", deployment)
apps.patch_namespaced_deployment_scale("web", "default", {"spec": {"replicas": 3}})
assert apps.read_namespaced_deployment_scale("web", "default").spec.replicas == 3


def writer():
    time.sleep(0.5)
    v1.create_namespaced_config_map("default", client.V1ConfigMap(metadata=client.V1ObjectMeta(name="py2")))
    v1.delete_namespaced_config_map("py2", "default")


rv = v1.list_namespaced_config_map("default").metadata.resource_version
threading.Thread(target=writer).start()
seen = []
w = watch.Watch()
for event in w.stream(v1.list_namespaced_config_map, "default", resource_version=rv, timeout_seconds=10):
    seen.append((event["type"], event["object"].metadata.name))
    if len(seen) == 2:
        w.stop()
assert seen == [("ADDED", "py2"), ("DELETED", "py2")], seen

try:
    v1.read_namespaced_config_map("nope", "default")
    raise AssertionError("read of a missing object succeeded")
except client.exceptions.ApiException as e:
    assert e.status == 404, e.status

# Server-side apply: the client sends the body as JSON under the apply content type.
def apply_cm(manager, value, **kwargs):
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "py-ssa"}, "data": {"a": value}}
    return v1.patch_namespaced_config_map(
        "py-ssa", "default", body, field_manager=manager,
        _content_type="application/apply-patch+yaml", **kwargs)


applied = apply_cm("py-client", "1")
assert applied.data == {"a": "1"}, applied.data
assert [(m.manager, m.operation) for m in applied.metadata.managed_fields] == [("py-client", "Apply")]
try:
    apply_cm("other", "2")
    raise AssertionError("a conflicting apply succeeded")
except client.exceptions.ApiException as e:
    assert e.status == 409, e.status
    assert "py-client" in e.body, e.body
forced = apply_cm("other", "2", force=True)
assert forced.data == {"a": "2"}, forced.data
assert [m.manager for m in forced.metadata.managed_fields] == ["other"]

print("python client: ok")
