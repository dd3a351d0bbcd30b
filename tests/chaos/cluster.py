"""The chaos run's cluster of real processes, each with a name the faults refer to.

ZooKeeper, ``bookie-1``…``bookie-4`` (each on a small filesystem of its own, see
diskfull.py), ``broker-1``, ``broker-2`` (E=3, Qw=2, Qa=2), ``auditor-1``, ``auditor-2``
and ``gateway``. With network namespaces (netns.py) every bookie, broker and auditor
runs in a namespace of its own at its own address; ZooKeeper, the gateway and the
workload stay in the root namespace, at the bridge's address. Without them (not root,
no ``ip``) everything listens on 127.0.0.1 and partitions are not available. Brokers
serve both the gRPC door (the SDK) and Pulsar's binary protocol (pulsar-client), each on
a port of its own at the broker's address; a partition from the clients cuts both.

Usable from a plain script and from pytest. The processes are children of the thread
that starts them (``PR_SET_PDEATHSIG``): call :meth:`ChaosCluster.start`,
:meth:`restart`, :meth:`replace` from the main thread (or another thread that lives as
long as the cluster).
"""

from __future__ import annotations

import logging
import shutil
import signal
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import diskfull
import netns
from diskfull import SmallDisk

from magnetar.common.zkserver import ZooKeeperServer
from magnetar.testing.processes import (
    AuditorProcess,
    BookieProcess,
    BrokerProcess,
    GatewayProcess,
    ServiceProcess,
)

log = logging.getLogger(__name__)

MiB = 1 << 20


@dataclass
class ClusterSettings:
    """What the cluster is made of and how quickly it notices faults."""

    bookies: int = 4
    brokers: int = 2
    auditors: int = 2
    gateway: bool = True
    ensemble_size: int = 3
    write_quorum: int = 2
    ack_quorum: int = 2
    use_netns: bool | None = None
    """None: when available (root, ip, nsenter, iptables)."""
    small_disks: bool | None = None
    """Each bookie on a filesystem of its own (for disk-full faults). None: when root."""
    disk_bytes: int = 1024 * MiB
    min_free_disk_bytes: int = 64 * MiB
    bookie_session_timeout_s: float = 4.0
    """A killed bookie's registration goes this long after the kill."""
    broker_session_timeout_s: float = 5.0
    auditor_session_timeout_s: float = 4.0
    grace_period_s: float = 5.0
    """The auditors mark a bookie lost this long after its registration went."""
    open_ledger_grace_s: float = 10.0
    live_writer_grace_s: float = 15.0
    """An idle live writer's open ledger is fenced this long after the marker, so Qw is
    back within 60 s of a bookie lost for good (5 + 15 s, then the copy)."""
    zk_tick_ms: int = 500
    broker_config: dict[str, Any] = field(default_factory=dict)
    """More broker settings (BrokerConfig fields), e.g. the load manager's (bench/balance.py)."""


@dataclass
class Member:
    """One named process of the cluster and what the faults did to it."""

    name: str
    kind: str  # "bookie", "broker", "auditor", "gateway"
    process: ServiceProcess
    disk: SmallDisk | None = None
    paused: bool = False
    gone: bool = False
    """Killed for good (a bookie replaced by a new one)."""

    @property
    def address(self) -> str:
        return self.process.address

    @property
    def up(self) -> bool:
        return self.process.alive and not self.paused and not self.gone

    def kill(self) -> None:
        """SIGKILL (a paused process is killed too)."""
        self.process.kill()
        self.paused = False

    def pause(self) -> None:
        self.process.process.kill(signal.SIGSTOP, wait=False)
        self.paused = True

    def resume(self) -> None:
        self.process.process.kill(signal.SIGCONT, wait=False)
        self.paused = False


class ChaosCluster:
    """ZooKeeper, bookies, brokers, auditors and the gateway for one chaos run."""

    def __init__(self, work_dir: Path, settings: ClusterSettings | None = None, *, run_id: str | None = None) -> None:
        self.work_dir = Path(work_dir).absolute()
        self.settings = settings or ClusterSettings()
        self.zk_root = f"/chaos-{uuid.uuid4().hex[:8]}"
        s = self.settings
        self.netns_reason = ""
        if s.use_netns is None:
            ok, self.netns_reason = netns.available()
            s.use_netns = ok
        self.lab: netns.NetnsLab | None = netns.NetnsLab(run_id) if s.use_netns else None
        self.state = self.lab.state if self.lab else netns.RunState(run_id or uuid.uuid4().hex[:4])
        if s.small_disks is None:
            s.small_disks = diskfull.loop_available() or (self.lab is not None)
        self.zk: ZooKeeperServer | None = None
        self.members: dict[str, Member] = {}
        self._counters = {"bookie": 0, "broker": 0, "auditor": 0}

    # -- naming and addresses ----------------------------------------------------------
    @property
    def host(self) -> str:
        """The root namespace's address for the namespaced processes (ZooKeeper's)."""
        return self.lab.bridge_ip if self.lab else "127.0.0.1"

    @property
    def zk_connect(self) -> str:
        assert self.zk is not None
        return self.zk.connect_string

    @property
    def service_url(self) -> str:
        """The brokers' addresses, comma-separated (what the workload connects to)."""
        return ",".join(m.address for m in self.of_kind("broker"))

    @property
    def pulsar_url(self) -> str:
        """The brokers' Pulsar protocol doors as one ``pulsar://h1:p1,h2:p2`` service URL
        (what the workload's pulsar-client clients connect to; each broker advertises its
        own ``pulsar://`` URL at its namespace's address for lookups)."""
        brokers = [m.process for m in self.of_kind("broker") if isinstance(m.process, BrokerProcess)]
        return "pulsar://" + ",".join(f"{b.host}:{b.protocol_port}" for b in brokers)

    @property
    def gateway_url(self) -> str | None:
        m = self.members.get("gateway")
        return m.process.url if m is not None and isinstance(m.process, GatewayProcess) else None

    def of_kind(self, kind: str, *, include_gone: bool = False) -> list[Member]:
        return [m for m in self.members.values() if m.kind == kind and (include_gone or not m.gone)]

    def __getitem__(self, name: str) -> Member:
        return self.members[name]

    def next_name(self, kind: str) -> str:
        return f"{kind}-{self._counters[kind] + 1}"

    # -- lifecycle -----------------------------------------------------------------------
    def start(self) -> ChaosCluster:
        """Start everything; on failure, stop what was started and re-raise."""
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self) -> None:
        s = self.settings
        self.work_dir.mkdir(parents=True, exist_ok=True)
        if self.lab is not None:
            self.lab.setup()
        self.zk = ZooKeeperServer(self.work_dir / "zookeeper", host=self.host, force_sync=False,
                                  tick_time_ms=s.zk_tick_ms, max_heap="512m")  # fmt: skip
        self.zk.start()
        if self.lab is not None:
            self.lab.zk_port = self.zk.port
        for _ in range(s.bookies):
            self.add_bookie()
        for _ in range(s.brokers):
            self._add("broker", BrokerProcess, {
                "ensemble_size": s.ensemble_size, "write_quorum": s.write_quorum, "ack_quorum": s.ack_quorum,
                "zk_session_timeout_s": s.broker_session_timeout_s, **s.broker_config,
            })  # fmt: skip
        for _ in range(s.auditors):
            self._add("auditor", AuditorProcess, {
                "grace_period_s": s.grace_period_s, "open_ledger_grace_s": s.open_ledger_grace_s,
                "live_writer_grace_s": s.live_writer_grace_s,
                "poll_interval_s": 0.5, "retry_interval_s": 1.0, "zk_session_timeout_s": s.auditor_session_timeout_s,
            })  # fmt: skip
        if s.gateway:
            gw = GatewayProcess(self.zk_connect, self.zk_root, self.work_dir / "gateway", name="gateway",
                                log_path=self.work_dir / "logs" / "gateway.log")  # fmt: skip
            self.members["gateway"] = Member("gateway", "gateway", gw)
            gw.start(timeout=60)

    def _add(self, kind: str, cls: type[ServiceProcess], config: dict[str, Any], *, data_dir: Path | None = None,
             disk: SmallDisk | None = None) -> Member:  # fmt: skip
        self._counters[kind] += 1
        name = f"{kind}-{self._counters[kind]}"
        kwargs: dict[str, Any] = {}
        if self.lab is not None:
            host = self.lab.add(name)
            kwargs = {"host": host.ip, "command_prefix": self.lab.prefix(name)}
        process = cls(self.zk_connect, self.zk_root, data_dir or self.work_dir / name, name=name,
                      log_path=self.work_dir / "logs" / f"{name}.log", config=config, **kwargs)  # fmt: skip
        if self.lab is not None:
            pulsar_port = getattr(process, "protocol_port", 0)  # a broker's Pulsar protocol door
            self.lab.hosts[name].ports = [process.port, *([pulsar_port] if pulsar_port else [])]
        member = Member(name, kind, process, disk=disk)
        self.members[name] = member
        process.start(timeout=60)
        return member

    def add_bookie(self) -> Member:
        """Start a new bookie (a new id, directory and, with small disks, filesystem)."""
        s = self.settings
        name = self.next_name("bookie")
        disk = None
        if s.small_disks:
            disk = SmallDisk(self.work_dir / "disks" / name, s.disk_bytes, self.state).mount()
        config = {
            "zk_session_timeout_s": s.bookie_session_timeout_s,
            "flush_interval_s": 0.2,
            "min_free_disk_bytes": s.min_free_disk_bytes if disk else 0,
            "disk_check_interval_s": 1.0,
        }
        return self._add("bookie", BookieProcess, config, data_dir=disk.data_dir if disk else None, disk=disk)

    def stop(self) -> None:
        """Stop everything and remove namespaces and mounts. Idempotent; never raises."""
        for m in reversed(list(self.members.values())):
            try:
                if m.paused:
                    m.resume()
                m.process.process.terminate(5.0)
            except Exception as exc:  # noqa: BLE001 - a cleanup goes on
                log.warning("stopping %s: %s", m.name, exc)
        if self.zk is not None:
            try:
                self.zk.stop()
            except Exception as exc:  # noqa: BLE001
                log.warning("stopping ZooKeeper: %s", exc)
        for m in self.members.values():
            if m.disk is not None:
                m.disk.unmount()
        if self.lab is not None:
            self.lab.teardown()
        else:
            self.state.remove()

    def __enter__(self) -> ChaosCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- faults ------------------------------------------------------------------------
    def kill(self, name: str) -> None:
        """SIGKILL ``name``."""
        self.members[name].kill()

    def restart(self, name: str, timeout: float = 60.0) -> None:
        """Start ``name`` again: same data directory, port, address (bookie id), namespace."""
        m = self.members[name]
        if m.paused:
            m.resume()
        if m.process.alive:
            m.kill()
        m.process.start(timeout)

    def pause(self, name: str) -> None:
        """SIGSTOP ``name``."""
        self.members[name].pause()

    def resume(self, name: str) -> None:
        """SIGCONT ``name``."""
        self.members[name].resume()

    def replace(self, name: str) -> Member:
        """``name`` (a bookie) is gone for good: kill it if needed, free its disk and
        namespace, and start a new bookie with a new id in its place."""
        m = self.members[name]
        assert m.kind == "bookie", name
        m.kill()
        m.gone = True
        if m.disk is not None:
            m.disk.unmount()
        else:
            shutil.rmtree(m.process.data_dir, ignore_errors=True)
        if self.lab is not None:
            self.lab.remove(name)
        return self.add_bookie()

    def heal_all(self, timeout: float = 60.0) -> list[str]:
        """Undo every fault still in place (paused, killed, partitioned, disk full);
        returns what was done."""
        done = []
        if self.lab is not None:
            self.lab.heal()
        for m in self.members.values():
            if m.gone:
                continue
            if m.disk is not None and m.disk.filler.exists():
                m.disk.free()
                done.append(f"freed {m.name}'s disk")
            if m.paused:
                m.resume()
                done.append(f"resumed {m.name}")
            if not m.process.alive:
                m.process.start(timeout)
                done.append(f"restarted {m.name}")
        return done

    def describe(self) -> dict[str, Any]:
        """The cluster's shape, for the report's settings."""
        return {
            "zookeeper": self.zk_connect if self.zk else None,
            "netns": bool(self.lab),
            "netns_unavailable": self.netns_reason or None,
            "small_disks": self.settings.small_disks,
            "members": {m.name: m.address for m in self.members.values()},
        }
