"""Taking a managed ledger over: load its list, recover a ledger left open, add a new one;
and preparing one nobody serves yet (a new partition's list and cursors).

A ledger whose entry count is stored as -1 was open when its owner stopped: it is
recovered (:meth:`LedgerClient.open_ledger` with recovery fences its bookies, so the old
owner can no longer add to it, and closes it at the last entry that reached Qa bookies)
and its real count and size are recorded. Empty ledgers are dropped from the list, and
deleted once the new list is stored. The new ledger is added with compare-and-set on the
list's version: if another broker changed the list meanwhile, it owns the topic now, and
this one gives up without overwriting anything.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from magnetar.common.errors import (
    MagnetarError,
    MetadataError,
    MetadataVersionConflict,
    NoSuchLedger,
    NotFound,
    TopicNotFound,
)
from magnetar.managedledger.config import ManagedLedgerConfig
from magnetar.managedledger.cursor_state import CursorDocument
from magnetar.managedledger.layout import EARLIEST, LedgerInfo, LedgerList
from magnetar.managedledger.ledgers import Ledgers, ReadHandle, WriteHandle
from magnetar.managedledger.position import ManagedLedgerName
from magnetar.managedledger.store import ManagedLedgerStore

log = logging.getLogger(__name__)


@dataclass
class LoadedList:
    """A ledger list as loaded, with recovered ledgers' counts filled in."""

    ledgers: LedgerList
    version: int
    properties: dict[str, str]
    readers: dict[int, ReadHandle] = field(default_factory=dict)
    """Readers of the ledgers recovered on the way (closed now)."""
    dropped: list[int] = field(default_factory=list)
    """Empty ledgers left out of the list, to delete once it is stored."""
    recovered: bool = False
    """A ledger was stored as open: its writer (the previous owner) did not close it."""


def empty_ledger_list(properties: dict[str, str] | None = None) -> dict[str, Any]:
    """The stored list of a managed ledger that has no ledger yet: what an admin's create
    of a topic writes; whoever loads the topic first adds its first ledger."""
    return {"ledgers": [], "properties": dict(properties or {})}


def _parse(name: ManagedLedgerName, doc: dict[str, Any]) -> tuple[list[LedgerInfo], dict[str, str]]:
    ledgers = doc.get("ledgers", [])
    properties = doc.get("properties", {})
    if not isinstance(ledgers, list) or not isinstance(properties, dict):
        raise MetadataError(f"managed ledger {name}: stored list is not {{'ledgers': [...], 'properties': {{...}}}}")
    return [LedgerInfo.from_dict(d) for d in ledgers], {str(k): str(v) for k, v in properties.items()}


async def load_ledger_list(name: ManagedLedgerName, client: Ledgers, store: ManagedLedgerStore) -> LoadedList:
    """Read (or create) the list and recover every ledger stored as open.

    Raises:
        MetadataVersionConflict: another broker created the list at the same moment.
        RecoveryError, NotEnoughBookies, MetadataError: recovery could not finish.
    """
    doc, version = await store.get(*name)
    if doc is None:
        doc = empty_ledger_list()
        version = await store.create(*name, doc)
        log.info("managed ledger %s created", name)
    infos, properties = _parse(name, doc)
    loaded = LoadedList(LedgerList([]), version, properties)
    for info in infos:
        if info.entries < 0:
            loaded.recovered = True
            try:
                reader = await client.open_ledger(info.ledger_id, recovery=True)
            except NoSuchLedger:
                log.warning("managed ledger %s: ledger %d is gone; leaving it out", name, info.ledger_id)
                continue
            info.entries = reader.metadata.last_entry_id + 1
            info.size = reader.metadata.length
            loaded.readers[info.ledger_id] = reader
            log.info("managed ledger %s: recovered ledger %d with %d entries", name, info.ledger_id, info.entries)
        if info.entries == 0:
            loaded.dropped.append(info.ledger_id)
            loaded.readers.pop(info.ledger_id, None)
            continue
        loaded.ledgers.append(info)
    return loaded


async def register_new_ledger(
    name: ManagedLedgerName,
    client: Ledgers,
    store: ManagedLedgerStore,
    config: ManagedLedgerConfig,
    ledgers: LedgerList,
    version: int,
    properties: dict[str, str],
    clock: Callable[[], float],
) -> tuple[WriteHandle, int]:
    """Create a ledger, append it to ``ledgers`` as the open one and store the list.

    Returns:
        The new ledger's handle and the list's new version.

    Raises:
        MetadataVersionConflict: the list changed since ``version`` (another broker took
            the topic over); the new ledger is deleted again and ``ledgers`` left as it was.
        TopicNotFound: the list was deleted meanwhile.
        NotEnoughBookies: too few writable bookies.
    """
    handle = await client.create_ledger(
        config.ensemble_size, config.write_quorum, config.ack_quorum,
        properties={"topic": str(name), "component": "managed-ledger"},
    )  # fmt: skip
    ledgers.append(LedgerInfo(handle.ledger_id, 0, 0, int(clock() * 1000)), is_open=True)
    doc = {"ledgers": ledgers.to_docs(), "properties": properties}
    try:
        new_version = await store.update(*name, doc, version)
    except MagnetarError as exc:
        ledgers.remove({handle.ledger_id})
        await handle.abort()
        try:
            await client.delete_ledger(handle.ledger_id)
        except MagnetarError as cleanup:
            log.warning("managed ledger %s: could not delete unused ledger %d: %s", name, handle.ledger_id, cleanup.message)
        if isinstance(exc, MetadataVersionConflict):
            raise MetadataVersionConflict(
                f"managed ledger {name} was changed by another broker (it has taken the topic over); "
                "not overwriting its ledger list"
            ) from exc
        if isinstance(exc, NotFound):
            raise TopicNotFound(f"managed ledger {name} was deleted") from exc
        raise
    log.info("managed ledger %s: new ledger %d", name, handle.ledger_id)
    return handle, new_version


@dataclass
class PreparedLedger:
    """What :func:`prepare_ledger` created, so that :func:`unprepare_ledger` removes
    exactly that (never what was there before)."""

    name: ManagedLedgerName
    created_list: bool
    created_cursors: list[str]


async def prepare_ledger(
    name: ManagedLedgerName, store: ManagedLedgerStore, cursors: list[str], config: ManagedLedgerConfig
) -> PreparedLedger:
    """Store an empty ledger list (when it has none) and each durable cursor of
    ``cursors`` it lacks, at its start: whoever opens the managed ledger later takes the
    cursors over, and they read every entry added from then on. Nothing is opened or
    fenced (a new partition of a partitioned topic is served by nobody yet).

    Raises:
        MetadataError: a cursor exists in a form that cannot be read back.
    """
    doc, _ = await store.get(*name)
    created_list = False
    if doc is None:
        try:
            await store.create(*name, empty_ledger_list())
            created_list = True
        except MetadataVersionConflict:
            pass  # someone else created it meanwhile: it is there
        doc, _ = await store.get(*name)
    infos, _ = _parse(name, doc or {})
    start = LedgerList(infos).start_mark_delete(EARLIEST, True)
    cursor_doc = CursorDocument(start).to_doc(config)
    prepared = PreparedLedger(name, created_list, [])
    existing = set(await store.list_cursors(*name))
    try:
        for cursor in cursors:
            if cursor in existing:
                continue
            try:
                await store.put_cursor(*name, cursor, cursor_doc, None)
            except MetadataVersionConflict:
                continue  # created meanwhile (the owner, or another grow): it is there
            prepared.created_cursors.append(cursor)
    except BaseException:
        await unprepare_ledger(store, prepared)
        raise
    return prepared


async def unprepare_ledger(store: ManagedLedgerStore, prepared: PreparedLedger) -> None:
    """Remove what :func:`prepare_ledger` created (the list with its cursors when it
    created the list, else the cursors it added)."""
    if prepared.created_list:
        await store.delete(*prepared.name)
        return
    for cursor in prepared.created_cursors:
        await store.delete_cursor(*prepared.name, cursor)
