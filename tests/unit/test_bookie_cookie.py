"""The bookie's cookie check against the cookie registered in ZooKeeper (no ZooKeeper:
an in-memory store with the same contract)."""

from dataclasses import asdict

import pytest

from magnetar.bookie.bookie import Bookie
from magnetar.bookie.config import BookieConfig
from magnetar.bookie.cookie import Cookie, check_registered, format_dirs, verify_registered
from magnetar.common.errors import PreconditionFailed
from magnetar.metadata.errors import NodeExists

BOOKIE = "127.0.0.1:3181"


class MemoryCookies:
    """``ZkCookieStore``'s contract in memory."""

    def __init__(self):
        self.docs = {}
        self.creates = 0

    async def read(self, bookie_id):
        return (dict(self.docs[bookie_id]), 0) if bookie_id in self.docs else None

    async def create(self, bookie_id, cookie):
        if bookie_id in self.docs:
            raise NodeExists(f"cookie of {bookie_id}")
        self.creates += 1
        self.docs[bookie_id] = dict(cookie)
        return 0


def config(tmp_path):
    return BookieConfig.load(
        data_dir=str(tmp_path / "data"), journal_dir=str(tmp_path / "journal"), flush_interval_s=3600,
        gc_interval_s=3600, disk_check_interval_s=3600, index_map_bytes=1 << 26, min_free_disk_bytes=0,
    )


def cookie(instance="a" * 32, bookie_id=BOOKIE):
    return Cookie(bookie_id=bookie_id, data_dir="/d", journal_dir="/j", instance_id=instance)


def test_decision_without_a_registered_cookie_registers():
    assert check_registered(cookie(), None, formatted=True) is True  # a new bookie
    assert check_registered(cookie(), None, formatted=False) is True  # an upgrade: disk cookie only


def test_decision_with_the_same_instance_starts():
    assert check_registered(cookie(), cookie(), formatted=False) is False


@pytest.mark.parametrize("formatted, says", [(True, "are empty"), (False, "carry another cookie")])
def test_decision_with_another_instance_is_refused_with_what_to_do(formatted, says):
    with pytest.raises(PreconditionFailed) as err:
        check_registered(cookie("b" * 32), cookie("a" * 32), formatted=formatted)
    message = err.value.message
    assert "\n" not in message
    assert says in message and f"magnetar shell cookie-delete --bookie {BOOKIE}" in message
    assert "a" * 32 in message  # the registered instance


async def test_new_bookie_registers_its_cookie_then_restarts_on_it(tmp_path):
    store = MemoryCookies()
    cfg = config(tmp_path)
    disk, formatted = format_dirs(cfg, BOOKIE)
    assert formatted
    assert await verify_registered(store, disk, formatted) is True
    assert store.docs[BOOKIE] == asdict(disk)
    again, formatted = format_dirs(cfg, BOOKIE)
    assert await verify_registered(store, again, formatted) is False
    assert store.creates == 1


async def test_upgrade_registers_the_disk_cookie(tmp_path):
    cfg = config(tmp_path)
    disk, _ = format_dirs(cfg, BOOKIE)  # an existing deployment: cookies on disk only
    store = MemoryCookies()
    kept, formatted = format_dirs(cfg, BOOKIE)
    assert not formatted
    assert await verify_registered(store, kept, formatted) is True
    assert store.docs[BOOKIE]["instance_id"] == disk.instance_id


async def test_registered_meanwhile_by_the_same_instance_is_accepted(tmp_path):
    disk, formatted = format_dirs(config(tmp_path), BOOKIE)

    class Racing(MemoryCookies):
        async def read(self, bookie_id):
            found = await super().read(bookie_id)
            if found is None and not self.docs:
                self.docs[bookie_id] = asdict(disk)  # the other process registers after our read
                return None
            return found

    assert await verify_registered(Racing(), disk, formatted) is False


async def test_unreadable_registered_cookie_is_refused(tmp_path):
    disk, formatted = format_dirs(config(tmp_path), BOOKIE)
    store = MemoryCookies()
    store.docs[BOOKIE] = {"nonsense": 1}
    with pytest.raises(PreconditionFailed, match="cookie-delete"):
        await verify_registered(store, disk, formatted)


async def test_bookie_with_emptied_volumes_is_refused_and_nothing_is_changed(tmp_path):
    store = MemoryCookies()
    first = Bookie(config(tmp_path), BOOKIE, cookies=store)
    await first.start()
    await first.close()
    registered = dict(store.docs[BOOKIE])
    for d in ("data", "journal"):
        for f in sorted((tmp_path / d).rglob("*"), reverse=True):
            f.unlink() if f.is_file() else f.rmdir()

    wiped = Bookie(config(tmp_path), BOOKIE, cookies=store)
    with pytest.raises(PreconditionFailed, match="are empty"):
        await wiped.start()
    assert store.docs[BOOKIE] == registered

    # The operator retires the cookie: the bookie starts empty and registers anew.
    del store.docs[BOOKIE]
    again = Bookie(config(tmp_path), BOOKIE, cookies=store)
    await again.start()
    try:
        assert store.docs[BOOKIE]["instance_id"] != registered["instance_id"]
    finally:
        await again.close()
