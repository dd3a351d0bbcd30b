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
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from magnetar.bookie.config import BookieConfig
from magnetar.common.errors import PreconditionFailed

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
