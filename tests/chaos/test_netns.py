"""netns.py's rules, without root: the iptables commands a partition would run."""

from __future__ import annotations

import ipaddress
from typing import Any

import netns
import pytest
from netns import CLIENTS, Host, NetnsLab


@pytest.fixture
def lab(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> tuple[NetnsLab, list[tuple[str, ...]]]:
    ran: list[tuple[str, ...]] = []
    lab = NetnsLab("beef", state_dir=tmp_path)
    lab.subnet = ipaddress.IPv4Network("10.213.7.0/24")
    monkeypatch.setattr(lab, "_in", lambda host, *argv: ran.append(argv))
    monkeypatch.setattr(netns, "run", lambda *argv, check=True: pytest.fail(f"ran {argv}"))
    return lab, ran


def test_a_broker_cut_from_the_clients_is_cut_on_each_of_its_doors(lab):
    """The SDK dials a broker's gRPC port, pulsar-client its Pulsar protocol port: a
    partition from the clients must drop both, or pulsar-client would go on through it."""
    lab, ran = lab
    lab.hosts["broker-1"] = Host("broker-1", "ns", "10.213.7.2", "h0", "n0", ports=[41001, 41002])
    text = lab.partition("broker-1", CLIENTS)
    dropped = {(argv[2], argv[argv.index("--dport" if argv[2] == "INPUT" else "--sport") + 1])
               for argv in ran if argv[:2] == ("iptables", "-A") and argv[-1] == "DROP"}
    assert dropped == {("INPUT", "41001"), ("OUTPUT", "41001"), ("INPUT", "41002"), ("OUTPUT", "41002")}
    assert "41001" in text and "41002" in text
    for argv in ran:  # only the root namespace's traffic (the clients), never ZooKeeper's port
        assert ("-s" if argv[2] == "INPUT" else "-d") in argv and "10.213.7.1" in argv
    ran.clear()
    lab.heal("broker-1")
    assert len([argv for argv in ran if argv[:2] == ("iptables", "-D")]) == 4
    assert lab.hosts["broker-1"].rules == []
