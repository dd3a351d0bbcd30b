"""Topic and namespace names, as Apache Pulsar has them.

Names:
    A namespace is ``<tenant>/<namespace>``; a topic is ``persistent://<tenant>/<namespace>/<topic>``
    (or ``non-persistent://...``: kept in memory only, see docs/non-persistent.md).
    ``<tenant>/<namespace>/<topic>`` and a bare ``<topic>`` are short forms (the latter in
    ``public/default``). Partition ``i`` of a partitioned topic ``t`` is the topic
    ``t-partition-i``.

Rules (Pulsar's ``NamedEntity`` and ``TopicName``, tightened where ZooKeeper needs it):
    * tenant and namespace: 1-255 ASCII letters, digits and ``- _ = : .``, but not ``.``
      or ``..`` (ZooKeeper takes those for relative paths);
    * topic local name: 1-512 characters, anything but ``/``, control characters,
      characters ZooKeeper cannot hold in a znode name (U+D800-U+F8FF, U+FFF0-U+FFFF),
      leading or trailing white space, ``.`` and ``..``;
    * subscription: 1-1,024 characters, anything but ``/``, control characters and the
      characters ZooKeeper cannot hold (as for a topic), not ``.`` or ``..`` (it names a
      znode);
    * domain: ``persistent`` or ``non-persistent`` (a short name is persistent).
      Pulsar's legacy form with a cluster (``persistent://tenant/cluster/ns/topic``) is
      not accepted.
    * A ``-partition-N`` suffix names partition N only when N is a canonical decimal
      int32 (no sign, no leading zero), as in Pulsar: ``t-partition-01`` is a plain topic.

Bundles are in :mod:`magnetar.common.bundles`, key hashing in :mod:`magnetar.common.keyhash`.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any, Final

from magnetar.common.errors import InvalidArgument, InvalidTopicName

PERSISTENT: Final = "persistent"
NON_PERSISTENT: Final = "non-persistent"
PUBLIC_TENANT: Final = "public"
DEFAULT_NAMESPACE: Final = "default"
PARTITION_SUFFIX: Final = "-partition-"

MAX_SEGMENT_LENGTH: Final = 255
"""Longest tenant or namespace name, in characters."""
MAX_LOCAL_NAME_LENGTH: Final = 512
"""Longest topic local name (partition suffix included), in characters."""
MAX_SUBSCRIPTION_NAME_LENGTH: Final = 1024
"""Longest subscription name, in characters (it names a znode, and ZooKeeper bounds a
request at 1 MB)."""
MAX_PARTITION_INDEX: Final = 2**31 - 1
MAX_BUNDLES: Final = 65536
DEFAULT_BUNDLES: Final = 4

_SEGMENT_RE: Final = re.compile(r"[-=:.\w]+", re.ASCII)
_PARTITION_RE: Final = re.compile(r"-partition-(0|[1-9][0-9]{0,9})\Z")
# Control characters and what ZooKeeper refuses in a path (PathUtils.validatePath).
_BAD_LOCAL_CHAR_RE: Final = re.compile("[\x00-\x1f\x7f-\x9f/\ud800-\uf8ff\ufff0-\uffff]")

_TOPIC_HINT: Final = (
    "a valid topic name looks like persistent://<tenant>/<namespace>/<topic>, "
    "<tenant>/<namespace>/<topic> or <topic> (in public/default); tenant and namespace use "
    "letters, digits and - _ = : . only; the topic may use any character but '/' and "
    "control characters"
)
_NAMESPACE_HINT: Final = (
    "a valid namespace name looks like <tenant>/<namespace>, both made of "
    "letters, digits and - _ = : . (at most 255 characters each), e.g. public/default"
)


def _segment_problem(kind: str, value: object) -> str | None:
    """Why ``value`` is not a valid tenant or namespace name, or None when it is."""
    if not isinstance(value, str):
        return f"the {kind} must be a string, not {type(value).__name__}"
    if not value:
        return f"the {kind} is empty"
    if len(value) > MAX_SEGMENT_LENGTH:
        return f"the {kind} is {len(value)} characters long, more than {MAX_SEGMENT_LENGTH}"
    if not _SEGMENT_RE.fullmatch(value):
        bad = sorted({c for c in value if not _SEGMENT_RE.fullmatch(c)})
        return f"the {kind} {value!r} has characters that are not allowed: {''.join(bad)!r}"
    if value in (".", ".."):
        return f"the {kind} must not be {value!r}"
    return None


def _local_name_problem(value: object) -> str | None:
    """Why ``value`` is not a valid topic local name, or None when it is."""
    if not isinstance(value, str):
        return f"the topic must be a string, not {type(value).__name__}"
    if not value or value.isspace():
        return "the topic (local name) is empty"
    if len(value) > MAX_LOCAL_NAME_LENGTH:
        return f"the topic is {len(value)} characters long, more than {MAX_LOCAL_NAME_LENGTH}"
    match = _BAD_LOCAL_CHAR_RE.search(value)
    if match:
        return f"the topic {value!r} has a character that is not allowed: {match.group()!r}"
    if value != value.strip():
        return f"the topic {value!r} starts or ends with white space"
    if value in (".", ".."):
        return f"the topic must not be {value!r}"
    return None


def validate_tenant(tenant: str) -> str:
    """Return ``tenant`` if it is a valid tenant name.

    Raises:
        InvalidArgument: it is empty, too long or has characters outside ``[-=:.\\w]``.
    """
    problem = _segment_problem("tenant", tenant)
    if problem:
        raise InvalidArgument(f"invalid tenant name: {problem}; {_NAMESPACE_HINT}")
    return tenant


def _partition_index_of(local_name: str) -> int:
    """The N of a ``-partition-N`` suffix, -1 when there is none (or it is not canonical)."""
    match = _PARTITION_RE.search(local_name)
    if match is None:
        return -1
    index = int(match.group(1))
    return index if index <= MAX_PARTITION_INDEX else -1


@dataclass(frozen=True, order=True, slots=True)
class NamespaceName:
    """``<tenant>/<namespace>``: immutable, hashable, ordered by (tenant, namespace)."""

    tenant: str
    namespace: str

    def __post_init__(self) -> None:
        """Raises: InvalidArgument: either part breaks the naming rules."""
        for kind, value in (("tenant", self.tenant), ("namespace", self.namespace)):
            problem = _segment_problem(kind, value)
            if problem:
                raise InvalidArgument(
                    f"invalid namespace name {self.tenant}/{self.namespace}: {problem}; {_NAMESPACE_HINT}"
                )

    @classmethod
    def parse(cls, name: str) -> NamespaceName:
        """Parse ``"tenant/namespace"``.

        Raises:
            InvalidArgument: not two valid parts separated by one ``/``.
        """
        if not isinstance(name, str):
            raise InvalidArgument(f"a namespace name must be a string, not {type(name).__name__}")
        parts = name.split("/")
        if len(parts) != 2:
            raise InvalidArgument(
                f"invalid namespace name {name!r}: expected exactly one '/'; {_NAMESPACE_HINT}"
            )
        return cls(parts[0], parts[1])

    def topic(self, local_name: str) -> TopicName:
        """The persistent topic ``local_name`` in this namespace."""
        return TopicName(tenant=self.tenant, namespace=self.namespace, local_name=local_name)

    def __str__(self) -> str:
        return f"{self.tenant}/{self.namespace}"

    def __repr__(self) -> str:
        return f"NamespaceName({str(self)!r})"


@functools.total_ordering  # equality is by full name; order by _key (partitions numerically)
class TopicName:
    """A full topic name: immutable, hashable, ordered (partitions numerically after their base).

    Attributes:
        domain: ``"persistent"`` or ``"non-persistent"``.
        tenant: the tenant.
        namespace_part: the namespace within the tenant (``namespace`` is the NamespaceName).
        local_name: the topic within the namespace, with the partition suffix if any.
        partition_index: N for ``<base>-partition-N``, else -1.
    """

    __slots__ = ("domain", "tenant", "namespace_part", "local_name", "partition_index", "_full")
    domain: str
    tenant: str
    namespace_part: str
    local_name: str
    partition_index: int
    _full: str

    def __init__(
        self,
        domain: str = PERSISTENT,
        tenant: str = "",
        namespace: str = "",
        local_name: str = "",
        partition_index: int = -1,
    ) -> None:
        """Build a name from its parts (see :meth:`parse` for strings).

        Args:
            domain: ``"persistent"`` or ``"non-persistent"``.
            tenant: the tenant.
            namespace: the namespace within the tenant.
            local_name: the topic, including a ``-partition-N`` suffix for a partition.
            partition_index: derived from ``local_name``; when given (not -1) it must
                agree with it. Use :meth:`partition` to name a partition of a topic.

        Raises:
            InvalidTopicName: a part breaks the naming rules.
        """
        full = f"{domain}://{tenant}/{namespace}/{local_name}"
        if domain not in (PERSISTENT, NON_PERSISTENT):
            _fail(full, f"unknown topic domain {domain!r}; the domains are persistent and non-persistent")
        for problem in (
            _segment_problem("tenant", tenant),
            _segment_problem("namespace", namespace),
            _local_name_problem(local_name),
        ):
            if problem:
                _fail(full, problem)
        derived = _partition_index_of(local_name)
        if partition_index != -1 and partition_index != derived:
            _fail(
                full,
                f"partition_index={partition_index!r} does not match the local name "
                f"(which names {'partition ' + str(derived) if derived >= 0 else 'no partition'}); "
                "use TopicName.partition(index) to name a partition",
            )
        object.__setattr__(self, "domain", domain)
        object.__setattr__(self, "tenant", tenant)
        object.__setattr__(self, "namespace_part", namespace)
        object.__setattr__(self, "local_name", local_name)
        object.__setattr__(self, "partition_index", derived)
        object.__setattr__(self, "_full", full)

    @classmethod
    def parse(cls, name: str | TopicName) -> TopicName:
        """Parse a full or short topic name.

        Accepts ``persistent://tenant/ns/topic``, ``tenant/ns/topic`` and ``topic``
        (meaning ``persistent://public/default/topic``). A TopicName is returned as is.

        Raises:
            InvalidTopicName: the name is malformed; the message says what is wrong.
        """
        if isinstance(name, TopicName):
            return name
        if not isinstance(name, str):
            raise InvalidTopicName(
                f"a topic name must be a string, not {type(name).__name__}; {_TOPIC_HINT}"
            )
        if "://" in name:
            domain, rest = name.split("://", 1)
        else:
            domain, rest = PERSISTENT, name
            if "/" not in name:
                rest = f"{PUBLIC_TENANT}/{DEFAULT_NAMESPACE}/{name}"
        if domain not in (PERSISTENT, NON_PERSISTENT):
            _fail(name, f"unknown topic domain {domain!r}; the domains are persistent and non-persistent")
        parts = rest.split("/")
        if len(parts) < 3:
            _fail(
                name, f"expected 3 '/'-separated parts (tenant/namespace/topic), got {len(parts)}"
            )
        if len(parts) > 3:
            _fail(
                name,
                "too many '/'-separated parts: the topic must not contain '/', and the legacy "
                "form with a cluster (persistent://tenant/cluster/namespace/topic) is not supported",
            )
        return cls(domain=domain, tenant=parts[0], namespace=parts[1], local_name=parts[2])

    # -- parts -----------------------------------------------------------------
    @property
    def namespace(self) -> NamespaceName:
        """The namespace this topic belongs to."""
        return NamespaceName(self.tenant, self.namespace_part)

    @property
    def is_persistent(self) -> bool:
        """False for a ``non-persistent://`` topic (nothing of it is stored)."""
        return self.domain == PERSISTENT

    @property
    def is_partition(self) -> bool:
        """True when this names one partition (``<base>-partition-N``) of a partitioned topic."""
        return self.partition_index >= 0

    @property
    def partitioned_topic_name(self) -> TopicName:
        """The partitioned topic a partition belongs to; the topic itself when not a partition."""
        if not self.is_partition:
            return self
        base = self.local_name[: self.local_name.rindex(PARTITION_SUFFIX)]
        return TopicName(self.domain, self.tenant, self.namespace_part, base)

    def partition(self, index: int) -> TopicName:
        """Partition ``index`` of this topic: ``persistent://tenant/ns/<topic>-partition-<index>``.

        On a partition, the same index gives the partition itself (as Pulsar does).

        Raises:
            InvalidTopicName: ``index`` is not an int in [0, 2**31-1], this is a different
                partition already, or the name would be too long.
        """
        if not int_in(index, 0, MAX_PARTITION_INDEX):
            raise InvalidTopicName(
                f"partition index must be an int from 0 to {MAX_PARTITION_INDEX}, got {index!r}"
            )
        if self.is_partition:
            if index == self.partition_index:
                return self
            raise InvalidTopicName(
                f"{self} is partition {self.partition_index} of {self.partitioned_topic_name}; "
                "name partitions from the partitioned topic"
            )
        return TopicName(
            self.domain,
            self.tenant,
            self.namespace_part,
            f"{self.local_name}{PARTITION_SUFFIX}{index}",
        )

    # -- value semantics ---------------------------------------------------------
    def __str__(self) -> str:
        return self._full

    def __repr__(self) -> str:
        return f"TopicName({self._full!r})"

    def _key(self) -> tuple[str, str, str, str, int]:
        base = self.partitioned_topic_name.local_name if self.is_partition else self.local_name
        return (self.domain, self.tenant, self.namespace_part, base, self.partition_index)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TopicName) and self._full == other._full

    def __hash__(self) -> int:
        return hash(self._full)

    def __lt__(self, other: TopicName) -> bool:
        if not isinstance(other, TopicName):
            return NotImplemented
        return self._key() < other._key()

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"TopicName is immutable; cannot set {name}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"TopicName is immutable; cannot delete {name}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (TopicName, (self.domain, self.tenant, self.namespace_part, self.local_name))


def check_subscription_name(name: str) -> str:
    """Return ``name`` if it can name a subscription.

    Raises:
        InvalidArgument: empty, too long, '.', '..', or holding '/', a control character or
        one ZooKeeper cannot hold.
    """
    if not isinstance(name, str) or not name:
        raise InvalidArgument("a subscription name is required")
    if len(name) > MAX_SUBSCRIPTION_NAME_LENGTH:
        raise InvalidArgument(
            f"invalid subscription name {name[:40]!r}…: {len(name):,} characters long, more than "
            f"{MAX_SUBSCRIPTION_NAME_LENGTH:,}"
        )
    match = _BAD_LOCAL_CHAR_RE.search(name)
    if match or name in (".", ".."):
        raise InvalidArgument(
            f"invalid subscription name {name!r}: it must not be '.' or '..', or contain '/', control "
            f"characters or characters ZooKeeper cannot hold{f' (it has {match.group()!r})' if match else ''}"
        )
    return name


def _fail(name: str, problem: str) -> None:
    raise InvalidTopicName(f"invalid topic name {name!r}: {problem}; {_TOPIC_HINT}")


def int_in(value: object, low: int, high: int | None = None) -> bool:
    """True for an int (not a bool) from ``low`` to ``high`` (None: no upper bound)."""
    if isinstance(value, bool) or not isinstance(value, int):
        return False
    return low <= value and (high is None or value <= high)
