"""docs/gateway.md's curl examples run against a real gateway: every ``sh`` block marked
``<!-- test -->`` runs under ``bash -e`` with ``$GW`` set to the gateway's URL."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from gateway_support import GatewayCluster

import magnetar.asyncio as mg
from magnetar.client.admin import AdminClient

DOC = Path(__file__).parents[3] / "docs" / "gateway.md"
ORDERS = "persistent://public/default/orders"
BLOCK = re.compile(r"<!-- test -->\n```sh\n(.*?)```", re.DOTALL)


def blocks() -> list[str]:
    return BLOCK.findall(DOC.read_text())


def test_the_doc_has_tested_examples():
    assert len(blocks()) >= 9


@pytest.mark.parametrize("index", range(len(blocks())))
async def test_curl_example_runs(index: int, gateway_cluster: GatewayCluster):
    async with AdminClient(gateway_cluster.service_url) as admin:
        if ORDERS not in await admin.topics("public/default"):  # the examples' topic, with messages
            await admin.create_topic(ORDERS)
            async with mg.Client(gateway_cluster.service_url) as client:
                producer = await client.create_producer(ORDERS)
                for i in range(3):
                    await producer.send(f"order {i}".encode(), properties={"n": str(i)})
    script = "set -e -o pipefail\n" + blocks()[index]
    done = subprocess.run(
        ["bash", "-c", script], env={"GW": gateway_cluster.url, "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 0, f"block {index} failed:\n{blocks()[index]}\nstdout: {done.stdout}\nstderr: {done.stderr}"
    assert done.stdout.strip()  # every block prints what it got
