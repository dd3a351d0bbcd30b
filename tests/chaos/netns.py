"""Network partitions for the chaos run: one network namespace per process, wired to a bridge.

Each chosen process (bookie, broker, auditor) runs in a namespace of its own
(``nsenter --net=/run/netns/<ns> -- python -m magnetar...``, which execs, so the pid is
the service's and SIGSTOP/SIGKILL reach it), with a veth pair whose other end is on a
bridge in the root namespace. The bridge holds the first address of a private /24
(``10.213.N.0/24``, ``N`` chosen so that no route of this machine and no other live run
uses it); ZooKeeper, the gateway and the workload stay in the root namespace and are
reached at the bridge address.

A partition is iptables DROP rules inside a process's own namespace (so they vanish
with it, and nothing is added to the root namespace's tables):

- ``partition(a, b)``: ``a`` and ``b`` (two namespaced processes) do not hear each other;
- ``partition(a, ZOOKEEPER)``: ``a`` and ZooKeeper do not (a long enough one is a real
  session expiry);
- ``partition(a, CLIENTS)``: nothing from the root namespace reaches ``a``'s own ports
  (the workload and the gateway; a broker's gRPC port and its Pulsar protocol port),
  ZooKeeper still does;
- ``isolate(a)``: all of ``a``'s traffic on its veth is dropped.

Everything made here is named ``mgc<run id>…`` (netns ``mgchaos-<run id>-<process>``) and
recorded in a state file ``/run/magnetar-chaos/<run id>.json`` with the owner's pid, so
:func:`remove_stale` can remove what a dead run (SIGKILLed, power cut) left behind
without touching a live run's.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import os
import secrets
import shutil
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

STATE_DIR = Path("/run/magnetar-chaos")
NETNS_DIR = Path("/run/netns")
SUBNET_BASE = "10.213"
ZOOKEEPER = "zookeeper"
CLIENTS = "clients"


def run(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run a command; raise with its stderr when ``check`` and it fails."""
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class RunState:
    """The state file of one run: what it made (namespaces, links, mounts), for the
    cleanup of a run that died without cleaning up. Shared by netns.py and diskfull.py."""

    def __init__(self, run_id: str, state_dir: Path = STATE_DIR) -> None:
        self.run_id = run_id
        self.path = state_dir / f"{run_id}.json"
        self._lock = threading.Lock()
        self.data: dict[str, Any] = {"pid": os.getpid(), "namespaces": [], "links": [], "mounts": [], "subnet": None}

    def add(self, key: str, value: Any) -> None:
        with self._lock:
            if isinstance(self.data.get(key), list):
                if value not in self.data[key]:
                    self.data[key].append(value)
            else:
                self.data[key] = value
            self._save()

    def discard(self, key: str, value: Any) -> None:
        with self._lock:
            if value in self.data.get(key, []):
                self.data[key].remove(value)
            self._save()

    def _save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data))
        tmp.replace(self.path)

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)


def live_runs(state_dir: Path = STATE_DIR) -> dict[str, dict[str, Any]]:
    """Run id → state of every run whose owner process still lives."""
    out = {}
    for path in sorted(state_dir.glob("*.json")) if state_dir.exists() else []:
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if _pid_alive(int(data.get("pid", 0))):
            out[path.stem] = data
    return out


def remove_stale(state_dir: Path = STATE_DIR) -> list[str]:
    """Remove what dead runs left: their mounts, namespaces and links (named after
    their run id), and their state files. Returns what was removed."""
    removed: list[str] = []
    live = live_runs(state_dir)
    for path in sorted(state_dir.glob("*.json")) if state_dir.exists() else []:
        if path.stem in live:
            continue
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            data = {}
        for mount in data.get("mounts", []):
            if run("umount", "-l", mount, check=False).returncode == 0:
                removed.append(f"mount {mount}")
        path.unlink(missing_ok=True)
    # Namespaces and links of runs without a live owner, state file or not.
    for ns in list_namespaces():
        if ns.startswith("mgchaos-") and ns.split("-")[1] not in live:
            run("ip", "netns", "del", ns, check=False)
            removed.append(f"netns {ns}")
    for link in list_links():
        if link.startswith("mgc") and not any(link.startswith(f"mgc{rid}") for rid in live):
            run("ip", "link", "del", link, check=False)
            removed.append(f"link {link}")
    return removed


def list_namespaces() -> list[str]:
    out = run("ip", "netns", "list", check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def list_links() -> list[str]:
    out = run("ip", "-o", "link", "show", check=False).stdout
    names = []
    for line in out.splitlines():
        parts = line.split(":", 2)
        if len(parts) >= 2:
            names.append(parts[1].strip().split("@")[0])
    return names


def available() -> tuple[bool, str]:
    """Whether namespaces, veth pairs, a bridge and iptables can be used here (root, the
    tools); with the reason when not."""
    if os.geteuid() != 0:
        return False, "not root"
    for tool in ("ip", "nsenter", "iptables"):
        if shutil.which(tool) is None:
            return False, f"{tool} is not installed"
    probe = f"mgchaos-probe{os.getpid()}"
    try:
        run("ip", "netns", "add", probe)
        run("nsenter", f"--net={NETNS_DIR / probe}", "--", "iptables", "-S")
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
        return False, str(exc)
    finally:
        run("ip", "netns", "del", probe, check=False)
    return True, ""


@dataclass
class Host:
    """One process's namespace: its address and the veth pair."""

    name: str
    netns: str
    ip: str
    veth_host: str
    veth_ns: str
    ports: list[int] = field(default_factory=list)
    """The ports clients dial on this process (for ``partition(a, CLIENTS)``): its gRPC
    port, and a broker's Pulsar protocol port."""
    rules: list[list[str]] = field(default_factory=list)


class NetnsLab:
    """The namespaces, veth pairs and bridge of one chaos run."""

    def __init__(self, run_id: str | None = None, state_dir: Path = STATE_DIR) -> None:
        self.run_id = run_id or secrets.token_hex(2)
        self.state = RunState(self.run_id, state_dir)
        self.bridge = f"mgc{self.run_id}br"
        self.hosts: dict[str, Host] = {}
        self.subnet: ipaddress.IPv4Network | None = None
        self._next_host = 2
        self._next_index = 0
        self.zk_port: int | None = None
        self._lock = threading.Lock()

    @property
    def bridge_ip(self) -> str:
        """The root namespace's address on the bridge (ZooKeeper, gateway, workload)."""
        assert self.subnet is not None, "setup() first"
        return str(self.subnet.network_address + 1)

    def _pick_subnet(self) -> ipaddress.IPv4Network:
        used = [ipaddress.ip_network(d["subnet"]) for d in live_runs(self.state.path.parent).values() if d.get("subnet")]
        routes = run("ip", "-4", "route", "show", "table", "all", check=False).stdout
        addrs = run("ip", "-4", "-o", "addr", "show", check=False).stdout
        for word in (routes + " " + addrs).split():
            try:
                used.append(ipaddress.ip_network(word, strict=False))
            except ValueError:
                continue
        start = int(self.run_id, 16) % 250
        for i in range(250):
            candidate = ipaddress.IPv4Network(f"{SUBNET_BASE}.{(start + i) % 250 + 1}.0/24")
            if not any(candidate.overlaps(u) for u in used if u.prefixlen >= 8):
                return candidate
        raise RuntimeError(f"no free /24 under {SUBNET_BASE}.0.0/16")

    def setup(self) -> None:
        """Remove stale leftovers of dead runs, then make the bridge on a free /24."""
        for what in remove_stale(self.state.path.parent):
            log.warning("removed a dead chaos run's %s", what)
        self.subnet = self._pick_subnet()
        self.state.add("subnet", str(self.subnet))
        self.state.add("links", self.bridge)
        run("ip", "link", "add", self.bridge, "type", "bridge")
        run("ip", "addr", "add", f"{self.bridge_ip}/24", "dev", self.bridge)
        run("ip", "link", "set", self.bridge, "up")

    def add(self, name: str) -> Host:
        """A namespace for process ``name`` with the next address of the subnet."""
        assert self.subnet is not None, "setup() first"
        with self._lock:
            index, self._next_index = self._next_index, self._next_index + 1
            ip = str(self.subnet.network_address + self._next_host)
            self._next_host += 1
        host = Host(name, f"mgchaos-{self.run_id}-{name}", ip, f"mgc{self.run_id}h{index}", f"mgc{self.run_id}n{index}")
        self.state.add("namespaces", host.netns)
        self.state.add("links", host.veth_host)
        run("ip", "netns", "add", host.netns)
        run("ip", "link", "add", host.veth_host, "type", "veth", "peer", "name", host.veth_ns)
        run("ip", "link", "set", host.veth_ns, "netns", host.netns)
        run("ip", "link", "set", host.veth_host, "master", self.bridge)
        run("ip", "link", "set", host.veth_host, "up")
        self._in(host, "ip", "link", "set", "lo", "up")
        self._in(host, "ip", "addr", "add", f"{ip}/24", "dev", host.veth_ns)
        self._in(host, "ip", "link", "set", host.veth_ns, "up")
        self.hosts[name] = host
        return host

    def remove(self, name: str) -> None:
        """Remove ``name``'s namespace and veth pair (its processes should be gone)."""
        host = self.hosts.pop(name, None)
        if host is None:
            return
        run("ip", "link", "del", host.veth_host, check=False)
        run("ip", "netns", "del", host.netns, check=False)
        self.state.discard("links", host.veth_host)
        self.state.discard("namespaces", host.netns)

    def prefix(self, name: str) -> list[str]:
        """The command prefix that runs a program in ``name``'s namespace."""
        return ["nsenter", f"--net={NETNS_DIR / self.hosts[name].netns}", "--"]

    def _in(self, host: Host, *argv: str) -> None:
        run("nsenter", f"--net={NETNS_DIR / host.netns}", "--", *argv)

    def _drop(self, host: Host, *rules: list[str]) -> None:
        for rule in rules:
            self._in(host, "iptables", "-A", *rule, "-j", "DROP")
            host.rules.append(rule)

    # -- faults ----------------------------------------------------------------------
    def partition(self, a: str, b: str) -> str:
        """Cut ``a`` from ``b`` (a process name, :data:`ZOOKEEPER` or :data:`CLIENTS`) both
        ways; returns a description."""
        host = self.hosts[a]
        if b == ZOOKEEPER:
            assert self.zk_port is not None
            zk, port = self.bridge_ip, str(self.zk_port)
            self._drop(host, ["OUTPUT", "-d", zk, "-p", "tcp", "--dport", port],
                       ["INPUT", "-s", zk, "-p", "tcp", "--sport", port])  # fmt: skip
            return f"{a} ({host.ip}) cut from ZooKeeper ({zk}:{port})"
        if b == CLIENTS:
            assert host.ports, f"{a} has no client ports"
            root = self.bridge_ip
            for port in map(str, host.ports):
                self._drop(host, ["INPUT", "-s", root, "-p", "tcp", "--dport", port],
                           ["OUTPUT", "-d", root, "-p", "tcp", "--sport", port])  # fmt: skip
            ports = ",".join(map(str, host.ports))
            return f"{a} ({host.ip}:{ports}) cut from the clients in the root namespace"
        other = self.hosts[b]
        self._drop(host, ["INPUT", "-s", other.ip], ["OUTPUT", "-d", other.ip])
        return f"{a} ({host.ip}) cut from {b} ({other.ip})"

    def isolate(self, a: str) -> str:
        """Drop everything ``a`` sends or receives on its veth; returns a description."""
        host = self.hosts[a]
        self._drop(host, ["INPUT", "-i", host.veth_ns], ["OUTPUT", "-o", host.veth_ns])
        return f"{a} ({host.ip}) isolated"

    def heal(self, name: str | None = None) -> None:
        """Remove the DROP rules of ``name`` (default: of every namespace)."""
        for host in [self.hosts[name]] if name else list(self.hosts.values()):
            for rule in reversed(host.rules):
                self._in(host, "iptables", "-D", *rule, "-j", "DROP")
            host.rules.clear()

    def teardown(self) -> None:
        """Remove every namespace, veth pair and the bridge of this run, and its state file."""
        for name in list(self.hosts):
            self.remove(name)
        run("ip", "link", "del", self.bridge, check=False)
        self.state.remove()
