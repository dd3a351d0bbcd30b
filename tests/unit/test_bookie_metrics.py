"""A bookie's /metrics under BookKeeper's names (bookie/metrics.py), read from the core and
the gRPC door's request counts: status, writable dirs, disk usage, journal, requests."""

from __future__ import annotations

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import CollectorRegistry
from test_bookie_core import FakeDisk, fill, make

from magnetar.bookie.metrics import BookieCollector, ledger_dir_usage_name
from magnetar.bookie.opstats import ServerStats


def _scrape(registry: CollectorRegistry) -> dict[tuple[str, frozenset], float]:
    text = generate_latest(registry).decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for f in text_string_to_metric_families(text) for s in f.samples}  # fmt: skip


def test_ledger_dir_usage_is_named_as_bookkeeper_names_it():
    assert ledger_dir_usage_name("/data/bookkeeper/ledgers") == "bookie_ledger_dir__data_bookkeeper_ledgers_usage"
    assert ledger_dir_usage_name("./data/bookie-1") == "bookie_ledger_dir___data_bookie_1_usage"


async def test_status_journal_disk_and_requests(tmp_path):
    disk = FakeDisk(75 << 30)  # of 100 GiB
    b = make(tmp_path, disk)
    await b.start()
    try:
        server = ServerStats()
        registry = CollectorRegistry()
        registry.register(BookieCollector(b, server))
        await fill(b, 1, 3)
        server.add_entry_request.record(True, 0.002)
        server.add_entry_request.record(True, 0.004)
        server.read_entry_request.record(False, 0.001)
        s = _scrape(registry)
        assert s[("bookie_SERVER_STATUS", frozenset())] == 1
        assert s[("bookie_ledger_writable_dirs", frozenset())] == 1
        assert s[(ledger_dir_usage_name(str(tmp_path)), frozenset())] == 25.0
        assert s[("bookie_journal_JOURNAL_WRITE_BYTES", frozenset())] == b.journal.bytes_written > 0
        assert s[("bookie_journal_JOURNAL_NUM_FORCE_WRITES", frozenset())] == b.journal.fsyncs >= 1
        ok, failed = frozenset({("success", "true")}), frozenset({("success", "false")})
        assert s[("bookkeeper_server_ADD_ENTRY_REQUEST_count", ok)] == 2
        assert abs(s[("bookkeeper_server_ADD_ENTRY_REQUEST_sum", ok)] - 6.0) < 1e-9  # ms, as BookKeeper's
        assert s[("bookkeeper_server_READ_ENTRY_REQUEST_count", failed)] == 1
        assert s[("magnetar_bookie_ledgers", frozenset())] == 1  # Magnetar's names stay
        disk.free = 1000
        b._check_disk()
        s = _scrape(registry)
        assert s[("bookie_SERVER_STATUS", frozenset())] == 0
        assert s[("bookie_ledger_writable_dirs", frozenset())] == 0
    finally:
        await b.close()
