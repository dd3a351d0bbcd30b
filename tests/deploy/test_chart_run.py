"""The Helm chart, run on this machine: every container it renders runs as a local process.

There is no Kubernetes here, so this test plays the kubelet for the chart's own output:

- ``helm template`` renders the chart with the minimal overlay (one of everything, token
  authentication and authorization on) plus the DLQ replay CronJob;
- each StatefulSet and Deployment gets its pods (``<name>-<ordinal>``), each CronJob one
  pod; their init containers run first, in order, to completion (retried as a kubelet
  would), then their containers run as child processes, each started once the pods
  before it pass their readiness probes (which this test runs: gRPC, HTTP, exec);
- a container runs with its command and args (the image's entrypoint when it names no
  command), its env (values, ``fieldRef``, ``secretKeyRef``, ``configMapKeyRef``, then
  Kubernetes' ``$(VAR)`` expansion), ConfigMap and Secret volumes written to temporary
  folders, emptyDirs and PVCs as temporary folders;
- what cannot be the same here is rewritten, generically, in args, env values and
  ConfigMap files: every mount path to its folder, every Service name and pod DNS name
  with a port to ``127.0.0.1:<free port>`` of the pod behind it, a container's own ports
  (``localhost:P``, a value that is just ``P``) to its pod's free ports, ``0.0.0.0`` to
  ``127.0.0.1`` and the pod IP to ``127.0.0.1``.

Then, as NOTES.txt tells a user: an admin token is signed inside the gateway pod, a
message is produced through the broker Service from the broker pod, and it is read back
through the gateway (REST and WebSocket). Finally the CronJob's pod runs once with
``--master=local[2]`` instead of the Kubernetes master and replays a real DLQ.
"""

from __future__ import annotations

import asyncio
import base64
import importlib.util
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from magnetar.common.childproc import ChildProcess
from magnetar.common.healthcheck import grpc_health_serving, http_ready
from magnetar.common.netutil import can_connect, free_port

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "deploy" / "helm" / "magnetar"
OVERLAYS = REPO / "deploy" / "helm" / "overlays"
HELM = REPO / "build" / "tools" / "helm"
VENV_BIN = Path(sys.executable).parent
RELEASE = "magnetar"
NAMESPACE = "mg-test"
START_ORDER = ["zookeeper", "bookie", "broker", "auditor", "gateway"]
READY_TIMEOUT_S = 60.0
INIT_TIMEOUT_S = 60.0
JOB_TIMEOUT_S = 150.0
TOPIC = "persistent://public/default/orders"
SUBSCRIPTION = "billing"


# -- what the images hold, on this machine ------------------------------------------------


def _spark_home() -> str:
    spec = importlib.util.find_spec("pyspark")
    assert spec and spec.submodule_search_locations, "pyspark is missing: run `make setup`"
    return str(Path(list(spec.submodule_search_locations)[0]))


def _java_home() -> str:
    java = shutil.which("java")
    assert java, "java is missing: run `make setup`"
    return str(Path(os.path.realpath(java)).parents[1])


@dataclass(frozen=True)
class Image:
    """What an image gives a container: its entrypoint, its ENV, files it ships."""

    entrypoint: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    files: tuple[tuple[str, str], ...] = ()


def image_for(reference: str) -> Image:
    """The local stand-in of an image: the chart's images are magnetar (the package, its
    `magnetar` command on PATH), magnetar-spark (deploy/docker/Dockerfile, target spark) and zookeeper
    (Debian's zkServer.sh on PATH)."""
    repository = reference.rsplit(":", 1)[0].rsplit("/", 1)[-1]
    if repository == "magnetar-spark":
        return Image(
            entrypoint=("/bin/bash", str(REPO / "spark-jobs" / "entrypoint.sh")),
            env=(("SPARK_HOME", _spark_home()), ("JAVA_HOME", _java_home()),
                 ("PYTHONPATH", str(REPO / "spark-jobs")), ("PYSPARK_PYTHON", sys.executable),
                 ("PYSPARK_DRIVER_PYTHON", sys.executable), ("PYTHONUNBUFFERED", "1"),
                 # this machine's, not the image's (docs/spark.md): Spark binds loopback
                 ("SPARK_LOCAL_IP", "127.0.0.1")),
            files=(("/opt/magnetar/spark-jobs", str(REPO / "spark-jobs")),),
        )  # fmt: skip
    if repository in ("magnetar", "zookeeper"):
        return Image()
    raise AssertionError(f"the chart renders an image this test does not know: {reference}")


def machine_env() -> dict[str, str]:
    """The environment every container starts from: PATH finds `magnetar` and
    `spark-submit` in the virtualenv and Debian's zkServer.sh; nothing else of this
    process's environment (no MAGNETAR_* settings) leaks in."""
    keep = {k: v for k, v in os.environ.items() if k in ("HOME", "LANG", "LC_ALL", "USER", "LOGNAME")}
    keep["PATH"] = os.pathsep.join([str(VENV_BIN), "/usr/share/zookeeper/bin", os.environ.get("PATH", "/usr/bin:/bin")])
    return keep


# -- rendering ----------------------------------------------------------------------------


NOTES_TEMPLATE = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: rendered-notes
data:
  NOTES.txt: {{ tpl (.Files.Get "rendered-notes.txt") . | toJson }}
"""


def render(workdir: Path, values: list[Path], sets: list[str]) -> tuple[list[dict[str, Any]], str]:
    """The chart's objects and its NOTES.txt, rendered by `helm template` (NOTES.txt is
    rendered through a copy of the chart that wraps it in a ConfigMap: `helm install
    --dry-run` wants a cluster)."""
    assert HELM.exists(), f"{HELM} is missing: run `make setup`"
    chart = workdir / "chart"
    shutil.copytree(CHART, chart)
    shutil.copy(chart / "templates" / "NOTES.txt", chart / "rendered-notes.txt")
    (chart / "templates" / "zz-rendered-notes.yaml").write_text(NOTES_TEMPLATE)
    argv = [str(HELM), "template", RELEASE, str(chart), "--namespace", NAMESPACE]
    for v in values:
        argv += ["-f", str(v)]
    for s in sets:
        argv += ["--set", s]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, f"helm template failed:\n{out.stderr}"
    objects = [o for o in yaml.safe_load_all(out.stdout) if o]
    notes = next(o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "rendered-notes")
    objects.remove(notes)
    return objects, notes["data"]["NOTES.txt"]


# -- the pods -----------------------------------------------------------------------------


def _labels_match(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


@dataclass
class Pod:
    name: str
    component: str
    spec: dict[str, Any]
    labels: dict[str, str]
    root: Path
    claims: list[str] = field(default_factory=list)
    ports: dict[int, int] = field(default_factory=dict)
    """containerPort -> the free local port standing for it."""
    port_names: dict[str, int] = field(default_factory=dict)
    volumes: dict[str, Path] = field(default_factory=dict)
    mounts: dict[str, Path] = field(default_factory=dict)
    """mountPath -> local folder (every container of a pod mounts a path the same way)."""
    processes: list[ChildProcess] = field(default_factory=list)

    def containers(self) -> list[dict[str, Any]]:
        return [*self.spec.get("initContainers", []), *self.spec["containers"]]


class LocalCluster:
    """The chart's workloads as local processes (see the module docstring)."""

    def __init__(self, objects: list[dict[str, Any]], root: Path) -> None:
        self.objects = objects
        self.root = root
        self.pods: dict[str, Pod] = {}
        self.started: list[Pod] = []
        self.ran: set[tuple[str, str]] = set()
        """(pod, container) of every container run."""
        self.by_kind: dict[tuple[str, str], dict[str, Any]] = {
            (o["kind"], o["metadata"]["name"]): o for o in objects
        }
        for obj in objects:
            if obj["kind"] in ("StatefulSet", "Deployment"):
                template = obj["spec"]["template"]
                for i in range(int(obj["spec"].get("replicas", 1))):
                    claims = [c["metadata"]["name"] for c in obj["spec"].get("volumeClaimTemplates", [])]
                    self._add_pod(f"{obj['metadata']['name']}-{i}", template, claims)
            elif obj["kind"] == "CronJob":
                template = obj["spec"]["jobTemplate"]["spec"]["template"]
                self._add_pod(f"{obj['metadata']['name']}-manual", template, [])
        self.host_ports: dict[tuple[str, int], str] = {}
        """(DNS name, port) -> 127.0.0.1:local, for Services and pods' DNS names."""
        self.pod_hosts: set[str] = set()
        self._index_services()

    def _add_pod(self, name: str, template: dict[str, Any], claims: list[str]) -> None:
        labels = template["metadata"]["labels"]
        pod = Pod(name, labels["app.kubernetes.io/component"], template["spec"], labels, self.root / name, claims)
        for container in pod.containers():
            for port in container.get("ports", []):
                pod.ports.setdefault(port["containerPort"], free_port())
                if "name" in port:
                    pod.port_names[port["name"]] = port["containerPort"]
        self.pods[name] = pod

    def _index_services(self) -> None:
        for svc in (o for o in self.objects if o["kind"] == "Service"):
            name, spec = svc["metadata"]["name"], svc["spec"]
            pods = [p for p in self.pods.values() if _labels_match(spec["selector"], p.labels)]
            assert pods, f"Service {name} selects no pod"
            aliases = [name, f"{name}.{NAMESPACE}", f"{name}.{NAMESPACE}.svc", f"{name}.{NAMESPACE}.svc.cluster.local"]
            for port in spec["ports"]:
                target = port.get("targetPort", port["port"])
                pod = pods[0]  # a ClusterIP Service may send a client to any of them
                container_port = pod.port_names[target] if isinstance(target, str) else target
                for alias in aliases:
                    self.host_ports[(alias, port["port"])] = f"127.0.0.1:{pod.ports[container_port]}"
            if spec.get("clusterIP") == "None":  # per-pod DNS names of the StatefulSet's pods
                for pod in pods:
                    for alias in aliases:
                        host = f"{pod.name}.{alias}"
                        self.pod_hosts.add(host)
                        for container_port, local in pod.ports.items():
                            self.host_ports[(host, container_port)] = f"127.0.0.1:{local}"
                            self.host_ports[(host, local)] = f"127.0.0.1:{local}"

    # -- rewriting ------------------------------------------------------------------------

    def _hosts_re(self) -> re.Pattern[str]:
        hosts = sorted({h for h, _ in self.host_ports}, key=len, reverse=True)
        return re.compile(r"(?<![\w.-])(" + "|".join(map(re.escape, hosts)) + r"):(\d+)(?!\d)")

    def rewrite_hosts(self, pod: Pod, text: str) -> str:
        """Addresses only (idempotent): the pod's own ports, Services and pod DNS names."""

        def own(m: re.Match[str]) -> str:
            port = m.group(2)
            if port is not None and int(port) in pod.ports:
                return f"127.0.0.1:{pod.ports[int(port)]}"
            return "127.0.0.1" + (f":{port}" if port else "")

        text = re.sub(r"(?<![\w.-])(localhost|127\.0\.0\.1|0\.0\.0\.0)(?::(\d+))?(?!\d)", own, text)

        def known(m: re.Match[str]) -> str:
            key = (m.group(1), int(m.group(2)))
            assert key in self.host_ports, f"{m.group(0)} names a known host with a port nothing serves"
            return self.host_ports[key]

        text = self._hosts_re().sub(known, text)
        if self.pod_hosts:  # a pod DNS name without a port
            bare = sorted(self.pod_hosts, key=len, reverse=True)
            text = re.sub(r"(?<![\w.-])(" + "|".join(map(re.escape, bare)) + r")(?![\w.-])", "127.0.0.1", text)
        return text

    def rewrite_paths(self, pod: Pod, text: str, image: Image) -> str:
        paths = {**{k: str(v) for k, v in pod.mounts.items()}, **dict(image.files)}
        if not paths:
            return text
        alternatives = "|".join(map(re.escape, sorted(paths, key=len, reverse=True)))
        return re.sub(r"(?<![\w.-])(" + alternatives + r")(?=/|$|[^\w.-])", lambda m: paths[m.group(1)], text)

    def rewrite(self, pod: Pod, text: str, image: Image, *, whole_port: bool = False) -> str:
        """A string of the rendered chart, rewritten once (see the module docstring)."""
        if whole_port and text.isdigit() and int(text) in pod.ports:
            return str(pod.ports[int(text)])
        return self.rewrite_paths(pod, self.rewrite_hosts(pod, text), image)

    # -- volumes and env ------------------------------------------------------------------

    def _source(self, kind: str, name: str) -> dict[str, bytes]:
        obj = self.by_kind.get((kind, name))
        assert obj is not None, f"the chart mounts the {kind} {name}, which it does not render"
        if kind == "Secret":
            data = {k: base64.b64decode(v) for k, v in (obj.get("data") or {}).items()}
            data.update({k: v.encode() for k, v in (obj.get("stringData") or {}).items()})
            return data
        return {k: v.encode() for k, v in (obj.get("data") or {}).items()}

    def prepare_volumes(self, pod: Pod) -> None:
        """Every volume as a folder: ConfigMaps rewritten, Secrets as they are."""
        for vol in pod.spec.get("volumes", []):
            folder = pod.root / "volumes" / vol["name"]
            folder.mkdir(parents=True, exist_ok=True)
            pod.volumes[vol["name"]] = folder
        for claim in pod.claims:
            folder = pod.root / "pvc" / claim
            folder.mkdir(parents=True, exist_ok=True)
            pod.volumes[claim] = folder
        for container in pod.containers():
            for mount in container.get("volumeMounts", []):
                assert "subPath" not in mount, "subPath mounts are not played here"
                folder = pod.volumes[mount["name"]]
                assert pod.mounts.setdefault(mount["mountPath"], folder) == folder, (
                    f"{pod.name}: {mount['mountPath']} is two different volumes")
        for vol in pod.spec.get("volumes", []):
            for kind, key in (("ConfigMap", "configMap"), ("Secret", "secret")):
                if key not in vol:
                    continue
                ref = vol[key]
                data = self._source(kind, ref.get("name") or ref["secretName"])
                items = ref.get("items") or [{"key": k, "path": k} for k in data]
                for item in items:
                    content = data[item["key"]]
                    if kind == "ConfigMap":  # addresses and paths; a Secret holds keys
                        content = self.rewrite(pod, content.decode(), Image()).encode()
                    target = pod.volumes[vol["name"]] / item["path"]
                    target.write_bytes(content)
                    target.chmod(item.get("mode", ref.get("defaultMode", 0o644)))

    def env(self, pod: Pod, container: dict[str, Any], image: Image) -> dict[str, str]:
        env = {**machine_env(), **dict(image.env)}
        defined: dict[str, str] = {}
        for var in container.get("env", []):
            if "value" in var:
                value = self.expand(pod, self.rewrite(pod, var["value"], image, whole_port=True), defined)
            else:
                source = var["valueFrom"]
                if "fieldRef" in source:
                    value = {"metadata.name": pod.name, "metadata.namespace": NAMESPACE,
                             "status.podIP": "127.0.0.1"}[source["fieldRef"]["fieldPath"]]
                else:
                    kind, ref = (("Secret", source["secretKeyRef"]) if "secretKeyRef" in source
                                 else ("ConfigMap", source["configMapKeyRef"]))
                    data = self._source(kind, ref["name"])
                    if ref["key"] not in data and ref.get("optional"):
                        continue
                    value = data[ref["key"]].decode()
            defined[var["name"]] = value
        env.update(defined)
        return env

    def expand(self, pod: Pod, text: str, defined: dict[str, str]) -> str:
        """Kubernetes' $(VAR) expansion (earlier variables of the container), then the
        addresses it produced rewritten."""
        if "$(" not in text:
            return text
        expanded = re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: defined.get(m.group(1), m.group(0)), text)
        return self.rewrite_hosts(pod, expanded)

    def argv(self, pod: Pod, container: dict[str, Any], env: dict[str, str], image: Image,
             edit: Callable[[list[str]], list[str]] | None = None) -> list[str]:
        args = [self.expand(pod, self.rewrite(pod, a, image, whole_port=True), env) for a in container.get("args", [])]
        if edit:
            args = edit(args)
        if "command" in container:
            argv = [self.expand(pod, self.rewrite(pod, c, image), env) for c in container["command"]] + args
        else:
            assert image.entrypoint, f"{pod.name}/{container['name']} runs its image's entrypoint, unknown here"
            argv = [*image.entrypoint, *args]
        program = shutil.which(argv[0], path=env["PATH"])  # found on the container's PATH
        assert program, f"{pod.name}/{container['name']}: {argv[0]} is not on PATH here"
        return [program, *argv[1:]]

    def cwd(self, pod: Pod, container: dict[str, Any], image: Image) -> Path:
        if "workingDir" in container:
            return Path(self.rewrite(pod, container["workingDir"], image))
        folder = pod.root / "cwd"
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    # -- running --------------------------------------------------------------------------

    def run_to_completion(self, pod: Pod, container: dict[str, Any], timeout: float,
                          edit: Callable[[list[str]], list[str]] | None = None) -> subprocess.CompletedProcess[str]:
        """Run a container until it exits (its own process group, killed on timeout)."""
        image = image_for(container["image"])
        env = self.env(pod, container, image)
        argv = self.argv(pod, container, env, image, edit)
        self.ran.add((pod.name, container["name"]))
        setpriv = shutil.which("setpriv")  # killed with this test, should it die first
        proc = subprocess.Popen([setpriv, "--pdeathsig", "KILL", "--", *argv] if setpriv else argv,
                                env=env, cwd=self.cwd(pod, container, image), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
            raise AssertionError(f"{pod.name}/{container['name']} ran over {timeout:g} s:\n{out[-4000:]}") from None
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
        (pod.root / f"{container['name']}.log").write_text(out)
        return subprocess.CompletedProcess(argv, proc.returncode, out, "")

    def run_init_containers(self, pod: Pod) -> None:
        """In order, each to exit 0; a failed one runs again after a back-off (kubelet)."""
        for container in pod.spec.get("initContainers", []):
            deadline = time.monotonic() + INIT_TIMEOUT_S
            delay = 0.5
            while True:
                done = self.run_to_completion(pod, container, INIT_TIMEOUT_S)
                if done.returncode == 0:
                    break
                assert time.monotonic() < deadline, (
                    f"init container {pod.name}/{container['name']} kept failing (exit {done.returncode}):\n"
                    f"{done.stdout[-4000:]}")
                time.sleep(delay)
                delay = min(delay * 2, 5.0)

    def probe(self, pod: Pod, container: dict[str, Any], probe: dict[str, Any]) -> bool:
        def local(port: int | str) -> int:
            return pod.ports[pod.port_names[port] if isinstance(port, str) else port]

        if "grpc" in probe:
            return grpc_health_serving(f"127.0.0.1:{local(probe['grpc']['port'])}", timeout_s=1.0)
        if "httpGet" in probe:
            get = probe["httpGet"]
            scheme = get.get("scheme", "HTTP").lower()
            return http_ready(f"{scheme}://127.0.0.1:{local(get['port'])}{get.get('path', '/')}", timeout_s=1.0)
        if "tcpSocket" in probe:
            return can_connect(f"127.0.0.1:{local(probe['tcpSocket']['port'])}")
        if "exec" in probe:
            image = image_for(container["image"])
            env = self.env(pod, container, image)
            argv = [self.expand(pod, self.rewrite(pod, a, image), env) for a in probe["exec"]["command"]]
            try:
                return subprocess.run(argv, env=env, capture_output=True, timeout=10).returncode == 0
            except subprocess.TimeoutExpired:
                return False
        raise AssertionError(f"{pod.name}: a probe of a kind this test does not play: {probe}")

    def start(self, pod: Pod) -> None:
        """Volumes, init containers, then the containers; back once every container's
        readiness probe passes."""
        self.started.append(pod)
        self.prepare_volumes(pod)
        self.run_init_containers(pod)
        for container in pod.spec["containers"]:
            image = image_for(container["image"])
            env = self.env(pod, container, image)
            process = ChildProcess(f"{pod.name}/{container['name']}", self.argv(pod, container, env, image),
                                   pod.root / f"{container['name']}.log", env=env,
                                   cwd=self.cwd(pod, container, image))
            pod.processes.append(process)
            self.ran.add((pod.name, container["name"]))
            process.start()
        for container, process in zip(pod.spec["containers"], pod.processes, strict=True):
            probe = container.get("readinessProbe")
            assert probe, f"{pod.name}/{container['name']} has no readiness probe"
            process.wait_ready(lambda c=container, p=probe: self.probe(pod, c, p), READY_TIMEOUT_S, interval=0.25)

    def start_all(self) -> None:
        for component in START_ORDER:
            for pod in [p for p in self.pods.values() if p.component == component]:
                self.start(pod)
        left = [p.name for p in self.pods.values() if p.component not in START_ORDER and p.spec.get("restartPolicy") != "Never"]
        assert not left, f"pods of components this test does not start: {left}"

    def stop(self) -> None:
        """The started pods' processes in the reverse order of their start (ZooKeeper last)."""
        for pod in reversed(self.started):
            for process in reversed(pod.processes):
                process.terminate(10)

    def logs(self) -> str:
        out = []
        for pod in self.pods.values():
            for process in pod.processes:
                out.append(f"--- {process.name} ---\n{process.log_tail(30)}")
        return "\n".join(out)

    def pod_of(self, workload: str) -> Pod:
        return next(p for p in self.pods.values() if p.name.startswith(f"{workload}-"))

    def container(self, pod: Pod, name: str) -> dict[str, Any]:
        return next(c for c in pod.containers() if c["name"] == name)

    def kubectl_exec(self, line: str, variables: dict[str, str]) -> str:
        """`kubectl -n NS exec deploy/NAME -c CONTAINER -- CMD ...` (a line of NOTES.txt) run
        in that pod's container: its env, its paths, its view of the Services."""
        words = shlex.split(line)
        assert words[:3] == ["kubectl", "-n", NAMESPACE] and words[3] == "exec", line
        target = words[4].split("/", 1)[1]
        container_name = words[words.index("-c") + 1]
        command = [variables.get(w[1:], w) if w.startswith("$") else w for w in words[words.index("--") + 1:]]
        pod = self.pod_of(target)
        container = self.container(pod, container_name)
        image = image_for(container["image"])
        env = self.env(pod, container, image)
        argv = [self.rewrite(pod, w, image) for w in command]
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, f"{line}\nexited {done.returncode}:\n{done.stdout}{done.stderr}"
        assert "Traceback" not in done.stderr, done.stderr
        return done.stdout.strip()


# -- the test -----------------------------------------------------------------------------


@pytest.fixture
def workdir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="chart-run-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _notes_line(notes: str, pattern: str) -> str:
    for line in notes.splitlines():
        if re.search(pattern, line):
            return line.strip()
    raise AssertionError(f"NOTES.txt has no line matching {pattern!r}:\n{notes}")


async def _ws_read_one(url: str) -> dict[str, Any]:
    from websockets.asyncio.client import connect

    async with connect(url, open_timeout=10) as ws:
        return json.loads(await asyncio.wait_for(ws.recv(), 15))


def _fill_dlq(service_url: str, token: str, count: int, wait: Callable[[], None]) -> None:
    """Real dead letters: a consumer with max_redeliver_count 1 negatively acknowledges
    every message of TOPIC, so the broker moves each to <topic>-<subscription>-DLQ."""
    import magnetar

    client = magnetar.Client(service_url, authentication=magnetar.AuthenticationToken(token))
    try:
        consumer = client.subscribe(
            TOPIC, SUBSCRIPTION, consumer_type=magnetar.ConsumerType.Shared, negative_ack_redelivery_delay_ms=50,
            dead_letter_policy=magnetar.ConsumerDeadLetterPolicy(max_redeliver_count=1),
        )
        producer = client.create_producer(TOPIC, batching_enabled=False)
        for i in range(count):
            producer.send(f"order {i}".encode(), properties={"n": str(i)})
        handled = 0
        deadline = time.monotonic() + 30
        while handled < count and time.monotonic() < deadline:
            try:
                msg = consumer.receive(timeout_millis=2000)
            except magnetar.Timeout:
                continue
            consumer.negative_acknowledge(msg)
            handled += 1
        assert handled == count, f"only {handled} of {count} messages were negatively acknowledged"
        wait()  # the redeliveries (sent after the delay) are what moves them: keep the consumer
        consumer.close()
    finally:
        client.close()


def _wait_dlq(admin: httpx.Client, dlq: str, want: int) -> None:
    path = "/admin/v2/" + dlq.replace("://", "/") + "/stats"
    deadline = time.monotonic() + 30
    got: Any = None
    while time.monotonic() < deadline:
        reply = admin.get(path)
        got = (reply.status_code, reply.text[:500])
        if reply.status_code == 200 and reply.json().get("msgInCounter", 0) >= want:
            return
        time.sleep(0.2)
    raise AssertionError(f"{dlq} does not hold {want} messages: {got}")


def test_chart_runs_as_local_processes(workdir: Path) -> None:
    started = time.monotonic()
    objects, notes = render(
        workdir,
        [OVERLAYS / "minimal.yaml"],
        ["zookeeper.replicas=1", "dlqReplay.enabled=true", f"dlqReplay.job.topic={TOPIC}",
         f"dlqReplay.job.subscription={SUBSCRIPTION}", "dlqReplay.replicas=1"],
    )
    kinds = {o["kind"] for o in objects}
    assert {"StatefulSet", "Deployment", "CronJob", "Secret", "Role"} <= kinds, kinds
    cluster = LocalCluster(objects, workdir / "pods")
    timings: dict[str, float] = {}
    try:
        cluster.start_all()
        timings["cluster ready"] = time.monotonic() - started

        # NOTES.txt step 2: an admin token, signed inside a gateway pod.
        token_line = _notes_line(notes, r"TOKEN=\$\(kubectl .* tokens create")
        token = cluster.kubectl_exec(re.fullmatch(r"TOKEN=\$\((.*)\)", token_line).group(1), {})  # type: ignore[union-attr]
        assert token.count(".") == 2, f"not a JWT: {token!r}"

        gateway = cluster.host_ports[(f"{RELEASE}-gateway", 8080)]
        gw = f"http://{gateway}"
        with httpx.Client(base_url=gw, timeout=15) as anonymous:
            assert anonymous.get("/admin/v2/tenants").status_code == 401  # authentication is on
        admin = httpx.Client(base_url=gw, timeout=15, headers={"Authorization": f"Bearer {token}"})
        try:
            assert "public" in admin.get("/admin/v2/tenants").json()

            # NOTES.txt step 3: produce through the broker Service, from the broker pod ...
            cluster.kubectl_exec(_notes_line(notes, r"-- magnetar produce "), {"TOKEN": token})
            # ... and read it back through the gateway: REST, then a WebSocket reader.
            curl = _notes_line(notes, r"curl .*examinemessage")
            path = re.search(r'"\$GW(/admin/v2/[^"]+)"', curl).group(1)  # type: ignore[union-attr]
            reply = admin.get(path)
            assert reply.status_code == 200 and reply.content == b"hello magnetar", (reply.status_code, reply.text)
            ws_line = _notes_line(notes, r"python -m websockets")
            ws_path = re.search(r"\)(/ws/v2/reader/[^\"]+)\"", ws_line).group(1).replace("$TOKEN", token)  # type: ignore[union-attr]
            frame = asyncio.run(_ws_read_one(f"ws://{gateway}{ws_path}"))
            assert base64.b64decode(frame["payload"]) == b"hello magnetar", frame
            timings["token, produce, read back"] = time.monotonic() - started

            # The CronJob's pod, once, with --master=local[2]: it replays a real DLQ.
            broker = cluster.host_ports[(f"{RELEASE}-broker", 6660)]
            dlq = f"{TOPIC}-{SUBSCRIPTION}-DLQ"
            _fill_dlq(f"magnetar://{broker}", token, 3, lambda: _wait_dlq(admin, dlq, 3))
            job = cluster.pod_of(f"{RELEASE}-dlq-replay")
            cluster.prepare_volumes(job)
            cluster.run_init_containers(job)

            def local_master(args: list[str]) -> list[str]:
                masters = [a for a in args if a.startswith("--master=")]
                assert len(masters) == 1, args
                return [("--master=local[2]" if a.startswith("--master=") else a) for a in args]

            done = cluster.run_to_completion(job, job.spec["containers"][0], JOB_TIMEOUT_S, local_master)
            timings["DLQ replay job"] = time.monotonic() - started
            assert done.returncode == 0, f"the replay exited {done.returncode}:\n{done.stdout[-6000:]}"
            assert "Traceback" not in done.stdout, done.stdout[-6000:]
            summary = json.loads(next(line for line in done.stdout.splitlines() if line.startswith("{")))
            assert summary["moved"] == 3, summary
            assert summary["dlqs"] == [dlq] or dlq in json.dumps(summary["dlqs"]), summary
            # The copies are on the topic again; the DLQ's subscription has nothing left.
            stats = admin.get("/admin/v2/" + TOPIC.replace("://", "/") + "/stats").json()
            assert stats["msgInCounter"] == 6, stats  # 3 originals, 3 replayed
            dlq_stats = admin.get("/admin/v2/" + dlq.replace("://", "/") + "/stats").json()
            assert dlq_stats["subscriptions"], dlq_stats
            assert all(sub["msgBacklog"] == 0 for sub in dlq_stats["subscriptions"].values()), dlq_stats
            # Every container the chart renders ran (init containers included).
            rendered = {(p.name, c["name"]) for p in cluster.pods.values() for c in p.containers()}
            assert cluster.ran == rendered, rendered ^ cluster.ran
        finally:
            admin.close()
    except BaseException:
        print(cluster.logs())
        raise
    finally:
        cluster.stop()
    print(f"timings (s from start): {json.dumps({k: round(v, 1) for k, v in timings.items()})}")
