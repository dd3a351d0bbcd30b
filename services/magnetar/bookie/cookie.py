"""The bookie's cookie (BookKeeper's): which bookie a journal and a data directory belong to.

A cookie is a small JSON file written once, when the directories are formatted, into both
the data directory and the journal directory: the bookie's id (its advertised host:port),
the two directories, and an instance id shared by the pair. A bookie checks them at every
start and refuses to run when they disagree with it, so that

- a data directory copied or mounted under another bookie's name is not served as that
  bookie's (readers would trust entries the metadata places elsewhere);
- a journal disk swapped for another bookie's, or an empty one next to a full data disk
  (one of the two volumes was lost), is found before a single entry is served.

Formatting is idempotent: :func:`format_dirs` on directories that carry this bookie's
cookies changes nothing, which is what an init container wants (``magnetar shell
bookieformat`` runs before every start of a bookie pod). Directories without cookies get
them, also when they already hold data (written before cookies existed).

The cookie is also registered in ZooKeeper (``<root>/cookies/<bookie id>``, as BookKeeper
keeps ``/ledgers/cookies/<bookie>``), checked by :func:`verify_registered` at every start
against the directories' cookie. The directories' cookie alone cannot tell a new bookie
from one whose two volumes both came back empty: both have no cookie, and both would be
formatted and serve. ZooKeeper remembers that the id held data: a bookie whose
directories do not carry the registered instance is refused, so that it does not
rejoin as if it held the ledgers the metadata places on it. Retiring the registered
cookie (``magnetar shell cookie-delete``) is the operator's statement that the data is
gone on purpose; the auditor then re-replicates it.
"""


from __future__ import annotations

import json
import os
import uuid
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from magnetar.bookie.config import BookieConfig
from magnetar.common.errors import MetadataVersionConflict, PreconditionFailed

COOKIE_FILE = "cookie.json"
LAYOUT_VERSION = 1


@dataclass(frozen=True)
class Cookie:
    bookie_id: str
    data_dir: str
    journal_dir: str
    instance_id: str
    layout_version: int = LAYOUT_VERSION
    created: str = ""


def directories(config: BookieConfig) -> tuple[Path, Path]:
    """The data and journal directories ``config`` names (absolute)."""
    data_dir = Path(config.data_dir).resolve()
    journal_dir = Path(config.journal_dir).resolve() if config.journal_dir else data_dir / "journal"
    return data_dir, journal_dir


def _read(directory: Path) -> Cookie | None:
    path = directory / COOKIE_FILE
    try:
        raw = json.loads(path.read_text())
        return Cookie(**raw)
    except FileNotFoundError:
        return None
    except (ValueError, TypeError, RecursionError) as exc:  # RecursionError: JSON nested too deep
        raise PreconditionFailed(f"the cookie {path} is unreadable ({exc}); restore it or reformat the bookie") from exc


def _write(directory: Path, cookie: Cookie) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / f".{COOKIE_FILE}.tmp"
    with open(tmp, "w") as fh:
        fh.write(json.dumps(asdict(cookie), indent=2) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    tmp.replace(directory / COOKIE_FILE)


def format_dirs(config: BookieConfig, bookie_id: str) -> tuple[Cookie, bool]:
    """Create the bookie's directories and cookies if they have none.

    Returns the cookie and whether anything was written (False: formatted already).

    Raises:
        PreconditionFailed: the directories carry cookies of another bookie, of two
            different instances, or only one of them has a cookie.
    """
    data_dir, journal_dir = directories(config)
    data_cookie, journal_cookie = _read(data_dir), _read(journal_dir)
    if data_cookie is None and journal_cookie is None:
        cookie = Cookie(
            bookie_id=bookie_id, data_dir=str(data_dir), journal_dir=str(journal_dir),
            instance_id=uuid.uuid4().hex, created=datetime.now(UTC).isoformat(timespec="seconds"),
        )
        _write(journal_dir, cookie)
        _write(data_dir, cookie)
        return cookie, True
    if data_cookie is None or journal_cookie is None:
        has, lacks = (data_dir, journal_dir) if data_cookie else (journal_dir, data_dir)
        raise PreconditionFailed(
            f"{has} has a bookie cookie but {lacks} has none: one of the bookie's volumes was replaced "
            f"or emptied; restore it, or decommission this bookie and format both directories anew"
        )
    if data_cookie.instance_id != journal_cookie.instance_id:
        raise PreconditionFailed(
            f"the cookies of {data_dir} and {journal_dir} are of different bookies' directories "
            f"({data_cookie.bookie_id} and {journal_cookie.bookie_id}); mount the right volumes"
        )
    if data_cookie.bookie_id != bookie_id:
        raise PreconditionFailed(
            f"{data_dir} belongs to bookie {data_cookie.bookie_id}, not to {bookie_id}: start this bookie "
            f"as {data_cookie.bookie_id} (advertised_address), or give it directories of its own"
        )
    return data_cookie, False


class RegisteredCookies(Protocol):
    """Where cookies are registered (``metadata.cookies.ZkCookieStore``)."""

    async def read(self, bookie_id: str) -> tuple[dict[str, Any], int] | None: ...

    async def create(self, bookie_id: str, cookie: dict[str, Any]) -> int: ...


def _registered(bookie_id: str, doc: dict[str, Any]) -> Cookie:
    try:
        return Cookie(**doc)
    except TypeError as exc:
        raise PreconditionFailed(
            f"the cookie registered in ZooKeeper for bookie {bookie_id} is unreadable ({exc}); "
            f"retire it with `magnetar shell cookie-delete --bookie {bookie_id}`"
        ) from exc


def check_registered(cookie: Cookie, registered: Cookie | None, formatted: bool) -> bool:
    """Decide whether a bookie with the directories' ``cookie`` may start, given the
    cookie ZooKeeper holds for its id. ``formatted``: the directories were empty and were
    formatted by this start.

    Returns True when the cookie must be registered (ZooKeeper has none: a new bookie, or
    one that ran before cookies were registered), False when the two agree.

    Raises:
        PreconditionFailed: ZooKeeper's cookie is of another instance of the directories:
            the volumes that held this bookie's ledgers were wiped or replaced.
    """
    if registered is None:
        return True
    if registered.instance_id == cookie.instance_id and registered.bookie_id == cookie.bookie_id:
        return False
    found = "are empty" if formatted else f"carry another cookie (instance {cookie.instance_id})"
    raise PreconditionFailed(
        f"bookie {cookie.bookie_id} held data (ZooKeeper has its cookie, instance {registered.instance_id}, "
        f"created {registered.created or 'before this version'}) but its directories {found}: restore its volumes, "
        f"or if the data is gone on purpose retire the cookie with `magnetar shell cookie-delete --bookie "
        f"{cookie.bookie_id}` and start it again (the auditor re-replicates its ledgers)"
    )


async def verify_registered(store: RegisteredCookies, cookie: Cookie, formatted: bool) -> bool:
    """Check the directories' ``cookie`` against the one registered for its bookie id, and
    register it if there is none. Returns whether it was registered now.

    Raises:
        PreconditionFailed: see :func:`check_registered`.
    """
    found = await store.read(cookie.bookie_id)
    registered = None if found is None else _registered(cookie.bookie_id, found[0])
    if not check_registered(cookie, registered, formatted):
        return False
    try:
        await store.create(cookie.bookie_id, asdict(cookie))
    except MetadataVersionConflict:
        # Registered meanwhile (another process with this id): it must be ours.
        found = await store.read(cookie.bookie_id)
        check_registered(cookie, None if found is None else _registered(cookie.bookie_id, found[0]), formatted)
        return False
    return True
