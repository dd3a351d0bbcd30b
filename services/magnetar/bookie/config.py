"""The bookie's configuration (env prefix ``MAGNETAR_BOOKIE_``; sample: conf/bookie.toml)."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from magnetar.common.config import AuthenticationSettings, ServiceConfig

DEFAULT_PORT = 3181


class BookieConfig(ServiceConfig, AuthenticationSettings):
    model_config = SettingsConfigDict(env_prefix="MAGNETAR_BOOKIE_", extra="forbid")

    data_dir: str = "./data/bookie"
    """Root of the bookie's files: journal/, ledgers/ (entry logs), index/, lastmark."""
    journal_dir: str = ""
    """Journal directory; put it on its own disk for speed (default: <data_dir>/journal)."""
    journal_max_file_bytes: int = Field(default=512 * 1024 * 1024, ge=4096)
    """A journal file rolls to a new one past this size."""
    journal_max_group_bytes: int = Field(default=4 * 1024 * 1024, ge=4096)
    """Largest write one group commit gathers before its fsync."""
    max_entry_bytes: int = Field(default=5 * 1024 * 1024 + 64 * 1024, ge=1)
    """Largest entry payload accepted (Pulsar's 5 MiB message limit plus headroom)."""
    write_cache_max_bytes: int = Field(default=64 * 1024 * 1024, ge=1024)
    """The write cache is flushed to the entry log when it holds this much."""
    flush_interval_s: float = Field(default=1.0, gt=0)
    """...and at least this often; each flush moves the LastLogMark forward."""
    entry_log_max_bytes: int = Field(default=1024 * 1024 * 1024, ge=4096)
    """An entry log rolls to a new one past this size."""
    gc_interval_s: float = Field(default=60.0, gt=0)
    """How often entry logs whose ledgers are all deleted are removed."""
    gc_metadata_interval_s: float = Field(default=900.0, ge=0)
    """How often the ledgers held here are compared with the ledger metadata, to remove
    copies of deleted ledgers and of closed ledgers no fragment places here (0: never)."""
    gc_overreplicated_ledger_wait_s: float = Field(default=86400.0, ge=0)
    """A closed ledger no fragment places here is removed only after it was found so this
    long (BookKeeper's gcOverreplicatedLedgerWaitTime)."""
    min_free_disk_bytes: int = Field(default=512 * 1024 * 1024, ge=0)
    """Below this much free disk the bookie turns read-only (adds refused)."""
    disk_check_interval_s: float = Field(default=5.0, gt=0)
    """How often free disk space is checked."""
    index_map_bytes: int = Field(default=64 * 1024 * 1024 * 1024, ge=1024 * 1024)
    """LMDB map size of the index (virtual; the file grows as needed)."""
