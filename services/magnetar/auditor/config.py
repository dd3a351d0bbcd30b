"""The auditor's configuration (env prefix ``MAGNETAR_AUDITOR_``; sample: conf/auditor.toml)."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from magnetar.common.config import (
    AuthenticationSettings,
    ClientTlsConfig,
    ServiceConfig,
    ServiceTokenSettings,
)

DEFAULT_PORT = 3182


class AuditorConfig(ServiceConfig, ClientTlsConfig, AuthenticationSettings, ServiceTokenSettings):
    model_config = SettingsConfigDict(env_prefix="MAGNETAR_AUDITOR_", extra="forbid")

    grace_period_s: float = Field(default=30.0, ge=0)
    """A bookie gone from ZooKeeper this long is lost: its ledgers are marked under-replicated."""
    audit_interval_s: float = Field(default=7 * 24 * 3600.0, gt=0)
    """How often the leader checks every fragment of every closed ledger (default weekly)."""
    full_entry_check: bool = False
    """The periodic check reads every entry a bookie should hold, not only each fragment's
    first and last (reads all the data: slow on a large cluster)."""
    open_ledger_grace_s: float = Field(default=30.0, ge=0)
    """An open ledger whose writer is gone is recovered (fenced and closed) once it has
    been marked this long, so its last fragment can be replicated."""
    live_writer_grace_s: float = Field(default=60.0, ge=0)
    """An open ledger whose writer is alive but has not replaced the lost bookie by its own
    ensemble change (it has not written since) is recovered once marked this long, as
    BookKeeper's ``openLedgerRereplicationGracePeriod``: the writer's next add is then
    refused as fenced and it goes on in a new ledger."""
    throttle_entries_per_s: int = Field(default=0, ge=0)
    """Most entries one replica copies per second (0: no limit)."""
    replication_workers: int = Field(default=2, ge=1)
    """Ledgers one replica replicates at the same time."""
    poll_interval_s: float = Field(default=1.0, gt=0)
    """How often idle workers look for marked ledgers, and the leader for lost bookies."""
    retry_interval_s: float = Field(default=5.0, gt=0)
    """A ledger that could not be finished (open with a live writer, no spare bookie …)
    is tried again by this replica after this long."""
    batch_entries: int = Field(default=500, ge=1)
    """Entries copied per read and per add request."""
    ledger_add_timeout_s: float = Field(default=10.0, gt=0)
    """A bookie that has not answered a copy's add by then is given up for another."""
    ledger_read_timeout_s: float = Field(default=10.0, gt=0)
    """A read a bookie has not answered by then goes to the next replica."""
