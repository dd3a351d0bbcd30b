"""``magnetar admin namespaces`` policy verbs, made from the policy catalogue
(:mod:`magnetar.common.policies`) with pulsar-admin's names: ``get-<policy>``,
``set-<policy>`` and ``remove-<policy>`` (e.g. ``set-message-ttl``, ``get-backlog-quotas``,
``set-schema-compatibility-strategy``).

:data:`OPTIONS` gives each catalogue entry its command-line side: the set verb's options
and how they make Pulsar's JSON body. The body is checked as the gateway checks it (its
model: :data:`magnetar.gateway.policy_routes.BINDINGS`), so a bad value is one line and
exit code 1 through either door, and nothing is sent. Over gRPC the verbs call what the
gateway's routes call (:func:`~magnetar.gateway.policy_routes.get_policy` ...); with
``--admin-url`` they send the same JSON to the same REST path.

``magnetar admin topics`` has the same verbs for the policies Pulsar serves at a topic's
level too (the catalogue's ``topic`` entries; e.g. ``topics set-message-ttl TOPIC -ttl
60``, ``topics get-retention TOPIC --applied``), made from the same options and sent to
the topic's routes (:func:`~magnetar.gateway.policy_routes.set_topic_policy` ...).

A get prints what the GET answers: a JSON document indented, a string, number or boolean
as is (``true``/``false``), and nothing when the namespace does not set the policy --
but ``get-retention``, which prints the retention that applies (the broker's default
when the namespace sets none), as it always has.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import TypeAdapter, ValidationError

from magnetar.client.admin import AdminClient
from magnetar.client.rest_admin import RestAdmin, _ns, _topic
from magnetar.common.errors import InvalidArgument
from magnetar.common.policies import BY_TOPIC_VERB, BY_VERB, CATALOGUE, TOPIC_CATALOGUE, PolicySpec
from magnetar.common.sizes import parse_size

if TYPE_CHECKING:
    from types import ModuleType


def _routes() -> ModuleType:
    """The gateway's policy routes (their models and calls), imported when a policy verb
    runs: FastAPI is a fifth of a second more for every other ``magnetar admin`` command."""
    from magnetar.gateway import policy_routes

    return policy_routes

Option = tuple[tuple[str, ...], dict[str, Any]]
"""argparse's flags and keywords, plus ``json``: the field of Pulsar's JSON body the
option sets (``""``: the option is the whole body; absent: not in the body)."""
WHOLE = ""


def _switch(json_field: str = WHOLE) -> list[Option]:
    """pulsar-admin's ``--enable`` / ``--disable`` (one of them): the whole body, or its
    ``json_field``."""
    return [(("-e", "--enable"), {"dest": "enable", "action": "store_true", "default": None, "switch": True,
                                  "json": json_field}),
            (("-d", "--disable"), {"dest": "enable", "action": "store_false", "switch": True})]


def _int(flags: tuple[str, ...], json_field: str, help_text: str, **kw: Any) -> Option:
    return flags, {"type": int, "metavar": "N", "help": help_text, "json": json_field, **kw}


def _str(flags: tuple[str, ...], json_field: str, help_text: str, **kw: Any) -> Option:
    return flags, {"metavar": "NAME", "help": help_text, "json": json_field, **kw}


QUOTA_TYPE: Option = (("-t", "--type"), {"dest": "quota_type", "choices": ("destination_storage", "message_age"),
                                         "help": "which quota (default destination_storage)"})


async def _applied_retention(admin: AdminClient | RestAdmin, namespace: str) -> Any:
    """The retention that applies: the broker's default when the namespace sets none
    (``GetRetention``; the REST door's 204 reads as 0 and 0)."""
    got = await admin.retention(namespace)
    return {"retentionTimeInMinutes": got.retention_time_minutes, "retentionSizeInMB": got.retention_size_mb}


@dataclass(frozen=True)
class CliBinding:
    """A catalogue entry's command-line side."""

    help: str
    options: list[Option]
    remove_options: list[Option] = field(default_factory=list)
    applied: Callable[[AdminClient | RestAdmin, str], Awaitable[Any]] | None = None
    """What the get verb prints when the namespace does not set the policy (else nothing)."""
    convert: Callable[[Any], Any] = lambda value: value
    """The whole body as sent (``-c backward``: ``"BACKWARD"``)."""

    def body(self, args: argparse.Namespace) -> Any:
        """Pulsar's JSON body from the parsed options."""
        out: dict[str, Any] = {}
        for flags, kw in self.options:
            if "json" not in kw:
                continue
            value = getattr(args, _dest(flags, kw))
            if kw["json"] == WHOLE:
                return self.convert(value)
            out[kw["json"]] = value
        return out

    def flag(self, json_field: str) -> str:
        """The option that sets ``json_field`` (for error messages)."""
        return next((flags[-1] for flags, kw in self.options if kw.get("json") == json_field), json_field or "the value")


def _dest(flags: tuple[str, ...], kw: dict[str, Any]) -> str:
    """argparse's dest: given, or the long flag's name."""
    return str(kw.get("dest") or flags[-1].lstrip("-").replace("-", "_"))


OPTIONS: dict[str, CliBinding] = {
    "retention": CliBinding(
        "how much acknowledged data a namespace's topics keep",
        [_int(("-t", "--time"), "retentionTimeInMinutes", "minutes (-1: unlimited, 0: none)", required=True,
              metavar="MIN", dest="time"),
         _int(("-s", "--size"), "retentionSizeInMB", "megabytes (-1: unlimited, 0: none)", required=True,
              metavar="MB", dest="size")],
        applied=_applied_retention),
    "messageTTL": CliBinding(
        "the message TTL in seconds (older messages are acknowledged on every subscription)",
        [_int(("-ttl", "--messageTTL"), WHOLE, "seconds (0: never expire)", required=True, metavar="S", dest="ttl")]),
    "backlogQuota": CliBinding(
        "a backlog quota (what happens to producers, or the slowest subscriptions, over it)",
        [_int(("-l", "--limit"), "limitSize", "bytes of backlog (destination_storage; -1: no limit)", default=-1),
         _int(("-lt", "--limitTime"), "limitTime", "seconds of age of the oldest unacknowledged message "
              "(message_age; -1: no limit)", default=-1),
         _str(("-p", "--policy"), "policy", "producer_request_hold, producer_exception or consumer_backlog_eviction",
              required=True),
         QUOTA_TYPE],
        remove_options=[QUOTA_TYPE]),
    "deduplication": CliBinding(
        "whether the namespace's topics deduplicate messages by producer and sequence id", _switch()),
    "delayedDelivery": CliBinding(
        "the delayed delivery policy (--disable: delayed messages go out at once)",
        [*_switch("active"),
         _int(("-t", "--time"), "tickTime", "tick time in ms (stored; Magnetar uses exact timers)", default=1000),
         _int(("-md", "--maxDelay"), "maxDeliveryDelayInMillis", "the longest delay in ms a producer may ask "
              "(0: no limit)", default=0)]),
    "publishRate": CliBinding(
        "the publish rate limit of each topic partition (producers over it are paused, not failed)",
        [_int(("-m", "--msg-publish-rate"), "publishThrottlingRateInMsg", "messages/s (-1: no limit)", default=-1),
         _int(("-b", "--byte-publish-rate"), "publishThrottlingRateInByte", "bytes/s (-1: no limit)", default=-1)]),
    "dispatchRate": CliBinding(
        "the dispatch rate limit of each topic partition (its subscriptions share it)",
        [_int(("-md", "--msg-dispatch-rate"), "dispatchThrottlingRateInMsg", "messages per period (-1: no limit)",
              default=-1),
         _int(("-bd", "--byte-dispatch-rate"), "dispatchThrottlingRateInByte", "bytes per period (-1: no limit)",
              default=-1),
         _int(("-dt", "--dispatch-rate-period"), "ratePeriodInSecond", "the period in seconds (default 1)",
              default=1, metavar="S"),
         (("-rp", "--relative-to-publish-rate"), {"action": "store_true", "json": "relativeToPublishRate",
                                                  "help": "add the topic's publish rate to the limits"})]),
    "deadLetterPolicy": CliBinding(
        "a namespace's retry/DLQ defaults ({topic} and {subscription} are replaced; no option: remove them)",
        [_int(("--max-redeliver-count",), "maxRedeliverCount", "retries / redeliveries before the DLQ (>= 1)"),
         _str(("--retry-letter-topic",), "retryLetterTopic", "e.g. {topic}-{subscription}-RETRY"),
         _str(("--dead-letter-topic",), "deadLetterTopic", "e.g. {topic}-{subscription}-DLQ"),
         _str(("--initial-subscription-name",), "initialSubscriptionName",
              "the DLQ's subscription, e.g. {subscription}-DLQ-sub")]),
    "schemaCompatibilityStrategy": CliBinding(
        "the schema compatibility strategy of the namespace's topics (UNDEFINED: the broker's)",
        [_str(("-c", "--compatibility"), WHOLE, "UNDEFINED, ALWAYS_INCOMPATIBLE, ALWAYS_COMPATIBLE, BACKWARD, "
              "FORWARD, FULL, BACKWARD_TRANSITIVE, FORWARD_TRANSITIVE, FULL_TRANSITIVE", required=True,
              metavar="STRATEGY", dest="compatibility")],
        convert=lambda name: name.strip().upper()),
    "isAllowAutoUpdateSchema": CliBinding(
        "whether producers may register new schema versions (--enable) or only use those uploaded", _switch()),
    "schemaValidationEnforced": CliBinding(
        "whether producers without a schema are refused on topics with one", _switch()),
    "persistence": CliBinding(
        "the bookkeeper quorums of the namespace's new ledgers (ensemble >= write >= ack >= 1)",
        [_int(("-e", "--bookkeeper-ensemble"), "bookkeeperEnsemble", "bookies per ledger", required=True),
         _int(("-w", "--bookkeeper-write-quorum"), "bookkeeperWriteQuorum", "copies of each entry", required=True),
         _int(("-a", "--bookkeeper-ack-quorum"), "bookkeeperAckQuorum", "copies confirmed before a send completes",
              required=True),
         (("-r", "--ml-mark-delete-max-rate"), {"type": float, "metavar": "RATE", "default": 0.0,
                                                "json": "managedLedgerMaxMarkDeleteRate",
                                                "help": "cursor positions stored per second at most (0: the "
                                                        "broker's interval)"})]),
    "compactionThreshold": CliBinding(
        "the bytes not yet compacted past which a topic is compacted automatically (0: never)",
        [_str(("-t", "--threshold"), WHOLE, "bytes, with k, m, g or t for KiB ... TiB (e.g. 10M; 0: never)",
              required=True, metavar="SIZE", dest="threshold")],
        convert=lambda text: parse_size(text, "-t/--threshold")),
    "autoTopicCreation": CliBinding(
        "the namespace's override of the brokers' topic auto-creation",
        [(("-e", "--enable"), {"action": "store_true", "json": "allowAutoTopicCreation",
                               "help": "allow auto-creation (without it: forbidden)"}),
         _str(("-t", "--type"), "topicType", "partitioned or non-partitioned (default)", default="non-partitioned",
              metavar="TYPE"),
         _int(("-n", "--num-partitions"), "defaultNumPartitions", "partitions of an auto-created partitioned topic")]),
    "maxProducersPerTopic": CliBinding(
        "the most producers a topic may have (one more is refused)",
        [_int(("-p", "--max-producers-per-topic", "--max-producers"), WHOLE, "producers (0: no limit)", required=True,
              dest="max_producers")]),
    "maxConsumersPerTopic": CliBinding(
        "the most consumers a topic may have (one more is refused)",
        [_int(("-c", "--max-consumers-per-topic", "--max-consumers"), WHOLE, "consumers (0: no limit)", required=True,
              dest="max_consumers")]),
    "inactiveTopicPolicies": CliBinding(
        "the inactive topic policies (whether and when topics without clients are deleted)",
        [(("-e", "--enable-delete-while-inactive"), {"dest": "delete_while_inactive", "action": "store_true",
                                                     "default": None, "switch": True, "json": "deleteWhileInactive"}),
         (("-d", "--disable-delete-while-inactive"), {"dest": "delete_while_inactive", "action": "store_false",
                                                      "switch": True}),
         _int(("-t", "--max-inactive-duration"), "maxInactiveDurationSeconds",
              "seconds without producers and consumers before deletion", required=True, metavar="S"),
         _str(("-m", "--delete-mode"), "inactiveTopicDeleteMode",
              "delete_when_no_subscriptions or delete_when_subscriptions_caught_up", required=True,
              metavar="MODE")]),
}


def add_policy_commands(namespaces: argparse._SubParsersAction[Any]) -> None:
    """Every catalogue entry's get, set and remove verbs."""
    for spec in CATALOGUE:
        cli = OPTIONS[spec.name]
        get, set_, *remove = spec.verbs
        get_op, set_op, remove_op = spec.operation_ids
        namespaces.add_parser(get, help=f"print {cli.help} as JSON (nothing: not set)", operations=(get_op,)).add_argument(
            "name", metavar="TENANT/NAMESPACE")
        _with_options(namespaces.add_parser(set_, help=f"set {cli.help}", operations=(set_op,)), cli.options)
        if remove:
            _with_options(namespaces.add_parser(remove[0], help=f"remove {cli.help} (the broker's default applies)",
                                                operations=(remove_op,) if remove_op else ()), cli.remove_options)


def add_topic_policy_commands(topics: argparse._SubParsersAction[Any]) -> None:
    """The get, set and remove verbs of every catalogue entry with a topic level."""
    for spec in TOPIC_CATALOGUE:
        cli = OPTIONS[spec.name]
        get, set_, remove = spec.topic_verbs
        assert spec.topic is not None
        get_op, set_op, remove_op = spec.topic.operation_ids
        p = topics.add_parser(get, help=f"print the topic's {cli.help} as JSON (nothing: not set)", operations=(get_op,))
        p.add_argument("name", metavar="TOPIC")
        p.add_argument("-ap", "--applied", action="store_true",
                       help="the value that applies (the topic's, else its namespace's)")
        _with_options(topics.add_parser(set_, help=f"set the topic's {cli.help}", operations=(set_op,)), cli.options,
                      "TOPIC")
        _with_options(topics.add_parser(remove, help=f"remove the topic's {cli.help} (its namespace's applies)",
                                        operations=(remove_op,)), cli.remove_options, "TOPIC")


def _with_options(parser: argparse.ArgumentParser, options: list[Option], metavar: str = "TENANT/NAMESPACE") -> None:
    parser.add_argument("name", metavar=metavar)
    switch = None
    for flags, kw in options:
        kw = {k: v for k, v in kw.items() if k != "json"}
        if kw.pop("switch", False):
            switch = switch or parser.add_mutually_exclusive_group(required=True)
            switch.add_argument(*flags, **kw)
        else:
            parser.add_argument(*flags, **kw)


async def run_policy_command(admin: AdminClient | RestAdmin, args: argparse.Namespace) -> bool:
    """Run a policy verb; False when ``args`` is none of them.

    Raises:
        InvalidArgument: a bad value (nothing is sent).
        MagnetarError: what the broker or gateway answered.
    """
    if args.action not in BY_VERB:
        return False
    spec, verb = BY_VERB[args.action]
    quota_type = getattr(args, "quota_type", None)
    if verb == "get":
        value = await _get(admin, spec, args.name)
        applied = OPTIONS[spec.name].applied
        _print(value if value is not None or applied is None else await applied(admin, args.name))
    elif verb == "set":
        body = OPTIONS[spec.name].body(args)
        parsed = _parsed(spec, body)
        if isinstance(admin, RestAdmin):
            await admin.request(spec.set_method, _path(args.name, spec.name), body, _quota_params(quota_type))
        else:
            await _routes().set_policy(admin, spec, args.name, parsed, quota_type)
    elif isinstance(admin, RestAdmin):
        await admin.request("DELETE", _path(args.name, spec.name), None, _quota_params(quota_type))
    else:
        await _routes().remove_policy(admin, spec, args.name, quota_type)
    return True


async def run_topic_policy_command(admin: AdminClient | RestAdmin, args: argparse.Namespace) -> bool:
    """Run a topic policy verb; False when ``args`` is none of them.

    Raises: as :func:`run_policy_command`.
    """
    if args.action not in BY_TOPIC_VERB:
        return False
    spec, verb = BY_TOPIC_VERB[args.action]
    level = spec.topic
    assert level is not None
    quota_type = getattr(args, "quota_type", None)
    routes = _routes()
    if verb == "get":
        if isinstance(admin, RestAdmin):
            segment = spec.get_segment if spec.quota_typed else level.name
            value = await admin.request("GET", _topic(args.name, segment), None, {"applied": "true"} if args.applied else None)
        else:
            value = await routes.get_topic_policy(admin, spec, args.name, args.applied)
            if value is not None:
                shown = TypeAdapter(routes.BINDINGS[spec.name].response)
                value = shown.dump_python(shown.validate_python(value), mode="json")
        _print(value)
    elif verb == "set":
        body = OPTIONS[spec.name].body(args)
        parsed = _parsed(spec, body)
        if not isinstance(admin, RestAdmin):
            await routes.set_topic_policy(admin, spec, args.name, parsed, quota_type)
        elif level.value_query is not None:
            await admin.request("POST", _topic(args.name, level.name), None, {level.value_query: body})
        else:
            await admin.request("POST", _topic(args.name, level.name), body, _quota_params(quota_type))
    elif isinstance(admin, RestAdmin):
        await admin.request("DELETE", _topic(args.name, level.name), None, _quota_params(quota_type))
    else:
        await routes.remove_topic_policy(admin, spec, args.name, quota_type)
    return True


async def _get(admin: AdminClient | RestAdmin, spec: PolicySpec, namespace: str) -> Any:
    if isinstance(admin, RestAdmin):
        return await admin.request("GET", _path(namespace, spec.get_segment))
    value = await _routes().get_policy(admin, spec, namespace)
    if value is None:
        return None
    shown = TypeAdapter(_routes().BINDINGS[spec.name].response)
    return shown.dump_python(shown.validate_python(value), mode="json")


def _parsed(spec: PolicySpec, body: Any) -> Any:
    """``body`` as the route's model takes it. Raises: InvalidArgument naming the option."""
    try:
        return _routes().BINDINGS[spec.name].parse(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        field_name = str(first["loc"][0]) if first["loc"] else WHOLE
        raise InvalidArgument(
            f"{OPTIONS[spec.name].flag(field_name)}: {first['msg']} (got {first.get('input')!r})"
        ) from None


def _path(namespace: str, segment: str) -> str:
    return _ns(namespace, segment)


def _quota_params(quota_type: str | None) -> dict[str, Any] | None:
    return {"backlogQuotaType": quota_type} if quota_type else None


def _print(value: Any) -> None:
    if value is None:
        return
    if isinstance(value, bool):
        print(str(value).lower())
    elif isinstance(value, str | int):
        print(value)
    else:
        print(json.dumps(value, indent=2))
