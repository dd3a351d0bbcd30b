"""``magnetar standalone`` as a user runs it: start, print addresses, stop on a signal."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

import magnetar
from magnetar.common.healthcheck import grpc_health_serving
from magnetar.common.netutil import free_port, port_is_free
from magnetar.common.tls import ClientTls, https_context
from magnetar.common.zkserver import four_letter_word
from magnetar.metadata.managed_ledgers import ZkManagedLedgerStore
from magnetar.metadata.session import ZkSession
from magnetar.testing.certs import TestCa
from magnetar.testing.pulsarclient import pulsar_client

pytestmark = pytest.mark.integration


def consecutive_free_ports(n: int) -> int:
    for _ in range(100):
        first = free_port()
        if first + n < 65536 and all(port_is_free("127.0.0.1", first + i) for i in range(n)):
            return first
    raise AssertionError("no run of free ports")


def launch(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    if "--port" not in args:  # the broker's port; never the default 6660 in tests
        args = (*args, "--port", str(free_port()))
    if "--protocol-port" not in args:  # nor Pulsar's 6650 and 6651
        args = (*args, "--protocol-port", str(free_port()))
    if "--protocol-tls-port" not in args:
        args = (*args, "--protocol-tls-port", str(free_port()))
    if "--auditor-port" not in args:  # nor the auditor's default 3182
        args = (*args, "--auditor-port", str(free_port()))
    if "--gateway-port" not in args:  # nor the gateway's default 8080
        args = (*args, "--gateway-port", str(free_port()))
    return subprocess.Popen(
        [sys.executable, "-m", "magnetar.tools.standalone", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )


def read_until_running(proc: subprocess.Popen[str], timeout: float = 90) -> list[str]:
    assert proc.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            _, err = proc.communicate(timeout=10)
            pytest.fail(f"standalone ended early (code {proc.returncode}): {lines} {err}")
        lines.append(line.rstrip("\n"))
        if "Magnetar standalone is running" in line:
            return lines
    pytest.fail(f"standalone did not come up: {lines}")


def pids_with_arg(text: str) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if text in cmdline:
                pids.append(int(entry.name))
    return pids


async def wait_for_stored_cursor(zk: str, topic: str, cursor: str, acked_through: int, timeout: float = 30) -> None:
    """Wait until ZooKeeper holds ``cursor`` of public/default/``topic`` with every entry
    up to ``acked_through`` acknowledged."""
    session = ZkSession(zk, "/magnetar")  # the standalone's default root
    await session.start()
    try:
        store = ZkManagedLedgerStore(session)
        deadline = time.monotonic() + timeout
        while True:
            doc, _ = await store.get_cursor("public", "default", topic, cursor)
            if doc is not None and doc["mark_delete"][1] >= acked_through:
                return
            assert time.monotonic() < deadline, f"cursor {cursor} not stored in {timeout} s: {doc}"
            await asyncio.sleep(0.1)
    finally:
        await session.close()


def test_standalone_runs_and_stops_on_sigint(tmp_path: Path) -> None:
    zk_port, bookie_port, auditor_port, gateway_port = free_port(), consecutive_free_ports(2), free_port(), free_port()
    protocol_port = free_port()
    data = tmp_path / "data"
    proc = launch("--data-dir", str(data), "--bookies", "2", "--zk-port", str(zk_port),
                  "--bookie-port", str(bookie_port), "--auditor-port", str(auditor_port),
                  "--gateway-port", str(gateway_port), "--protocol-port", str(protocol_port))  # fmt: skip
    try:
        lines = read_until_running(proc)
        # Pulsar applications are pointed at pulsar:// (or the gateway), and it answers.
        pulsar_url = f"pulsar://127.0.0.1:{protocol_port}"
        assert f"pulsar     {pulsar_url} http://127.0.0.1:{gateway_port} (Pulsar clients)" in lines
        client = pulsar_client(pulsar_url, operation_timeout_seconds=10)
        try:
            assert client.get_topic_partitions("standalone-wire") == ["persistent://public/default/standalone-wire"]
        finally:
            client.close()
        assert f"auditor    127.0.0.1:{auditor_port}" in lines
        assert grpc_health_serving(f"127.0.0.1:{auditor_port}")
        assert f"zookeeper  127.0.0.1:{zk_port}" in lines
        assert f"bookie-0   127.0.0.1:{bookie_port}" in lines
        assert f"bookie-1   127.0.0.1:{bookie_port + 1}" in lines
        assert any(line.startswith("broker") for line in lines)
        assert four_letter_word("127.0.0.1", zk_port, "ruok") == "imok"
        assert grpc_health_serving(f"127.0.0.1:{bookie_port + 1}")
        assert f"gateway    127.0.0.1:{gateway_port}" in lines
        gateway = f"http://127.0.0.1:{gateway_port}"
        assert httpx.get(f"{gateway}/readyz").json()["status"] == "ready"
        assert httpx.get(f"{gateway}/admin/v2/clusters").json() == ["standalone"]
        assert httpx.get(f"{gateway}/admin/v2/auditor").json()["leaderId"] == f"127.0.0.1:{auditor_port}"
        assert {p.name for p in (data / "logs").iterdir()} >= {
            "zookeeper.log", "bookie-0.log", "bookie-1.log", "broker.log", "auditor.log", "gateway.log"
        }  # fmt: skip
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
        proc.communicate()
    assert proc.returncode == 0, err
    assert "stopped" in out and "Traceback" not in err
    assert port_is_free("127.0.0.1", zk_port) and port_is_free("127.0.0.1", bookie_port)
    assert "signal received; shutting down" in (data / "logs" / "bookie-0.log").read_text()
    assert "stopped" in (data / "logs" / "auditor.log").read_text().splitlines()[-1]
    assert "signal received; shutting down" in (data / "logs" / "gateway.log").read_text()


def test_standalone_bookies_step_over_the_auditor_port() -> None:
    from magnetar.tools.standalone import bookie_ports

    assert bookie_ports(3181, 3, 3182) == [3181, 3183, 3184]
    assert bookie_ports(5000, 2, 3182) == [5000, 5001]


def test_busy_port_is_one_readable_line(tmp_path: Path) -> None:
    import socket

    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", 0))
        blocker.listen()
        busy = blocker.getsockname()[1]
        proc = launch("--data-dir", str(tmp_path), "--bookies", "1", "--zk-port", str(busy))
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 1
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"port {busy}" in err and "already in use" in err and "--zk-port" in err


def test_unreachable_external_zookeeper(tmp_path: Path) -> None:
    proc = launch("--data-dir", str(tmp_path), "--zookeeper", f"127.0.0.1:{free_port()}",
                  "--bookie-port", str(consecutive_free_ports(3)))  # fmt: skip
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 1 and "cannot reach ZooKeeper" in err and err.count("\n") == 1


def test_a_dying_bookie_stops_everything_with_exit_1(tmp_path: Path) -> None:
    zk_port, bookie_port = free_port(), consecutive_free_ports(1)
    proc = launch("--data-dir", str(tmp_path), "--bookies", "1", "--zk-port", str(zk_port),
                  "--bookie-port", str(bookie_port))  # fmt: skip
    try:
        read_until_running(proc)
        (bookie,) = [p for p in pids_with_arg(f"--port {bookie_port}") if p != proc.pid]
        os.kill(bookie, signal.SIGKILL)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
        proc.communicate()
    assert proc.returncode == 1
    assert "bookie-0 stopped unexpectedly" in err and "bookie-0.log" in err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert port_is_free("127.0.0.1", zk_port)  # ZooKeeper was stopped too


@pytest.mark.slow
def test_sigkill_of_the_whole_standalone_loses_no_acked_message(tmp_path: Path) -> None:
    import magnetar

    zk_port, bookie_port, broker_port = free_port(), consecutive_free_ports(2), free_port()
    data = tmp_path / "data"
    args = ("--data-dir", str(data), "--bookies", "2", "--zk-port", str(zk_port),
            "--bookie-port", str(bookie_port), "--port", str(broker_port))  # fmt: skip
    url = f"127.0.0.1:{broker_port}"
    # The restarted bookies wait out their killed sessions' registrations: 4 s sessions
    # (the shortest the private ZooKeeper's 2 s tick allows) instead of the default 10 s.
    env = {"MAGNETAR_BOOKIE_ZK_SESSION_TIMEOUT_S": "4"}
    proc = launch(*args, env=env)
    try:
        read_until_running(proc)
        with magnetar.Client(url) as client:
            consumer = client.subscribe("durable", "sub", initial_position=magnetar.InitialPosition.Earliest)
            producer = client.create_producer("durable", batching_enabled=False)
            for i in range(200):
                producer.send(b"%d" % i)  # acknowledged: stored on 2 bookies
            for i in range(120):
                msg = consumer.receive(timeout_millis=10_000)
                assert msg.data() == b"%d" % i
                consumer.acknowledge(msg)
            consumer.close()  # the broker stores the cursor when its last consumer leaves
        asyncio.run(wait_for_stored_cursor(f"127.0.0.1:{zk_port}", "durable", "sub", acked_through=119))
        proc.kill()  # SIGKILL: the children die with it (parent-death signal)
        proc.communicate(timeout=30)
        deadline = time.monotonic() + 30
        while pids_with_arg(str(data)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not pids_with_arg(str(data)), "children outlived the killed standalone"
        proc = launch(*args, env=env)
        read_until_running(proc, timeout=120)
        with magnetar.Client(url, operation_timeout_seconds=60) as client:
            again = client.subscribe("durable", "sub")
            assert again.receive(timeout_millis=30_000).data() == b"120"  # resumes after the last ack
            everything = client.subscribe("durable", "audit", initial_position=magnetar.InitialPosition.Earliest)
            assert [everything.receive(timeout_millis=30_000).data() for _ in range(200)] == [b"%d" % i for i in range(200)]
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
    finally:
        proc.kill()
        proc.communicate()


def test_standalone_with_tls_on_every_port(tmp_path: Path) -> None:
    ca = TestCa.create(tmp_path / "ca")
    node = ca.issue("node", ["127.0.0.1"])
    zk_port, bookie_port, gateway_port, port = free_port(), consecutive_free_ports(2), free_port(), free_port()
    tls_port = free_port()
    proc = launch("--data-dir", str(tmp_path / "data"), "--bookies", "2", "--zk-port", str(zk_port),
                  "--bookie-port", str(bookie_port), "--gateway-port", str(gateway_port), "--port", str(port),
                  "--protocol-tls-port", str(tls_port),
                  "--tls-cert-file", node.cert_file, "--tls-key-file", node.key_file,
                  "--tls-trust-certs-file", ca.cert_file)  # fmt: skip
    tls = ClientTls(ca.cert_file)
    try:
        lines = read_until_running(proc)
        assert any(line.startswith("pulsar") and f"pulsar+ssl://127.0.0.1:{tls_port}" in line for line in lines)
        wire = pulsar_client(f"pulsar+ssl://127.0.0.1:{tls_port}", tls_trust_certs_file_path=ca.cert_file,
                             operation_timeout_seconds=10)  # fmt: skip
        try:
            assert wire.get_topic_partitions("tls-standalone") == ["persistent://public/default/tls-standalone"]
        finally:
            wire.close()
        assert grpc_health_serving(f"127.0.0.1:{bookie_port}", tls=tls)
        assert not grpc_health_serving(f"127.0.0.1:{bookie_port}")  # no plain text on a TLS port
        gateway = f"https://127.0.0.1:{gateway_port}"
        assert httpx.get(f"{gateway}/admin/v2/clusters", verify=https_context(tls)).json() == ["standalone"]
        with magnetar.Client(f"magnetar+ssl://127.0.0.1:{port}", tls_trust_certs_file_path=ca.cert_file) as client:
            consumer = client.subscribe("tls-standalone", "s")
            client.create_producer("tls-standalone").send(b"secret")
            assert consumer.receive(timeout_millis=10_000).data() == b"secret"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
        proc.communicate()
    assert proc.returncode == 0, err
