"""The policy catalogue: each namespace policy described once, as Pulsar names it.

Every door is made from this table: the gateway's policy routes
(:mod:`magnetar.gateway.policy_routes`), the broker's gRPC carriers
(:mod:`magnetar.broker.rpc.namespaces`) and ``magnetar admin namespaces`` verbs
(:mod:`magnetar.tools.admin_policies`). Each of them binds an entry's ``name`` to its own
types (a pydantic model, a domain value, argparse options); a unit test
(``tests/unit/test_policy_catalogue.py``) fails when an entry lacks one of them, so a
policy cannot be half-added.

What an entry says, and nothing of any door's types (this module is in ``common/``, the
lowest layer):

- ``name``: Pulsar's REST path segment and its ``PolicyKind`` value
  (``/admin/v2/namespaces/{tenant}/{namespace}/<name>``).
- ``kind``: the suffix of the gRPC ``NamespacePolicyKind`` (``POLICY_<kind>``) and of the
  broker's ``PolicyKind`` member.
- ``carrier``: the field that carries it in the gRPC ``SetNamespacePolicyRequest``
  (``policy`` oneof) and ``NamespacePolicies``.
- ``set_method``: the HTTP method Pulsar sets it with (most POST, some PUT).
- ``removable``: Pulsar has a DELETE for it.
- ``default``: what a GET of a policy the namespace does not set answers, as JSON: None
  for Pulsar's null (204, no body; the broker's default applies), or the value Pulsar
  answers (its schema policies: ``"UNDEFINED"``, true, false; Magnetar's dead-letter
  defaults: their four fields, null).
- ``cli``: the stem of pulsar-admin's verbs (``get-<cli>``, ``set-<cli>``,
  ``remove-<cli>``).
- ``operation_ids``: Pulsar's swagger operationIds (get, set, remove).

Precedence (:func:`effective`): the most specific level that sets a policy wins -- a
topic's over its namespace's over the broker's default, as Pulsar's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, TypeVar

T = TypeVar("T")
LEVELS = ("namespace", "topic")
"""Levels a policy is served at: every entry at a namespace's, those with a
:class:`TopicLevel` also at a topic's (routes under
``/admin/v2/persistent/{tenant}/{namespace}/{topic}/<name>``, verbs of ``magnetar admin
topics``)."""


@dataclass(frozen=True)
class TopicLevel:
    """A policy's topic level, as Pulsar's PersistentTopics operations serve it (always
    set with POST)."""

    name: str
    """The path segment (``deduplicationEnabled``)."""
    operation_ids: tuple[str, str, str]
    """Pulsar's swagger operationIds (get, set, remove)."""
    summaries: tuple[str, str, str]
    value_query: str | None = None
    """The set takes its value in this query parameter, not a body (messageTTL)."""
    applied: bool = True
    """The GET takes Pulsar's ``applied`` query (true: the value that applies)."""
    cli: str | None = None
    """pulsar-admin's ``topics`` verb stem when it is not the namespace's (``max-producers``)."""


@dataclass(frozen=True)
class PolicySpec:
    """One policy, described once (see the module's docstring for each field)."""

    name: str
    kind: str
    carrier: str
    cli: str
    operation_ids: tuple[str, str, str | None]
    summaries: tuple[str, str, str | None]
    set_method: Literal["POST", "PUT"] = "POST"
    removable: bool = True
    default: Any = None
    get_name: str | None = None
    """The GET's path segment when Pulsar's differs (backlogQuotaMap)."""
    tenant_param: Literal["tenant", "property"] = "tenant"
    """Pulsar's name of the tenant in the path (publishRate's route says ``{property}``)."""
    quota_typed: bool = False
    """Set and remove name one backlog quota type (``backlogQuotaType`` query)."""
    get_cli: str | None = None
    """pulsar-admin's get verb when it is not ``get-<cli>`` (``get-backlog-quotas``)."""
    topic: TopicLevel | None = None
    """Its topic level; None: Pulsar has none (the policy is a namespace's only)."""

    @property
    def get_segment(self) -> str:
        return self.get_name or self.name

    @property
    def topic_verbs(self) -> tuple[str, ...]:
        """The CLI verbs of ``magnetar admin topics`` (none without a topic level)."""
        if self.topic is None:
            return ()
        if self.topic.cli is None:
            return self.verbs
        return (f"get-{self.topic.cli}", f"set-{self.topic.cli}", f"remove-{self.topic.cli}")

    @property
    def verbs(self) -> tuple[str, ...]:
        """The CLI verbs of ``magnetar admin namespaces`` (pulsar-admin's names)."""
        get = self.get_cli or f"get-{self.cli}"
        return (get, f"set-{self.cli}") + ((f"remove-{self.cli}",) if self.removable else ())


def _spec(name: str, kind: str, carrier: str, cli: str, ops: tuple[str, str, str | None],
          summaries: tuple[str, str, str | None], **kw: object) -> PolicySpec:
    return PolicySpec(name, kind, carrier, cli, ops, summaries, **kw)  # type: ignore[arg-type]


def _topic(name: str, op: str, what: str = "", *, removed: str | None = None, get_op: str | None = None,
           remove_op: str = "remove", summaries: tuple[str, str, str] | None = None, **kw: Any) -> TopicLevel:
    """A topic level as Pulsar's PersistentTopics names most of them: operationIds
    ``PersistentTopics_get<op>`` (or ``_<get_op>``), ``_set<op>``, ``_<remove_op><op>``;
    summaries "Get/Set the topic's <what>", "Remove the topic's <removed or what>"
    (or ``summaries``)."""
    ops = (f"PersistentTopics_{get_op or 'get' + op}", f"PersistentTopics_set{op}", f"PersistentTopics_{remove_op}{op}")
    told = summaries or (f"Get the topic's {what}", f"Set the topic's {what}", f"Remove the topic's {removed or what}")
    return TopicLevel(name, ops, told, **kw)


CATALOGUE: tuple[PolicySpec, ...] = (
    _spec("retention", "RETENTION", "retention", "retention",
          ("Namespaces_getRetention", "Namespaces_setRetention", "Namespaces_removeRetention"),
          ("Get the namespace's retention", "Set the namespace's retention", "Remove the namespace's retention"),
          topic=_topic("retention", "Retention", "retention")),
    _spec("messageTTL", "MESSAGE_TTL", "message_ttl_seconds", "message-ttl",
          ("Namespaces_getNamespaceMessageTTL", "Namespaces_setNamespaceMessageTTL",
           "Namespaces_removeNamespaceMessageTTL"),
          ("Get the message TTL in seconds",
           "Set the message TTL in seconds (older messages are acknowledged on every subscription)",
           "Remove the message TTL"),
          topic=_topic("messageTTL", "MessageTTL", "message TTL in seconds", removed="message TTL",
                       value_query="messageTTL")),
    _spec("backlogQuota", "BACKLOG_QUOTA", "backlog_quota", "backlog-quota",
          ("Namespaces_getBacklogQuotaMap", "Namespaces_setBacklogQuota", "Namespaces_removeBacklogQuota"),
          ("Get the backlog quotas by type", "Set a backlog quota", "Remove a backlog quota"),
          get_name="backlogQuotaMap", quota_typed=True, get_cli="get-backlog-quotas",
          topic=_topic("backlogQuota", "BacklogQuota", get_op="getBacklogQuotaMap", summaries=(
              "Get the topic's backlog quotas by type", "Set a backlog quota on the topic",
              "Remove a backlog quota from the topic"))),
    _spec("deduplication", "DEDUPLICATION", "deduplication", "deduplication",
          ("Namespaces_getDeduplication", "Namespaces_modifyDeduplication", "Namespaces_removeDeduplication"),
          ("Get whether the namespace deduplicates messages",
           "Switch message deduplication on or off for the namespace's topics",
           "Remove the namespace's deduplication setting (the broker's applies)"),
          topic=_topic("deduplicationEnabled", "Deduplication", summaries=(
              "Get whether the topic deduplicates messages", "Switch message deduplication on or off for the topic",
              "Remove the topic's deduplication setting"))),
    _spec("delayedDelivery", "DELAYED_DELIVERY", "delayed_delivery", "delayed-delivery",
          ("Namespaces_getDelayedDeliveryPolicies", "Namespaces_setDelayedDeliveryPolicies",
           "Namespaces_removeDelayedDeliveryPolicies"),
          ("Get the delayed delivery policy",
           "Set the delayed delivery policy (active false: delayed messages go out at once)",
           "Remove the delayed delivery policy"),
          topic=_topic("delayedDelivery", "DelayedDeliveryPolicies", "delayed delivery policy", remove_op="delete")),
    _spec("publishRate", "PUBLISH_RATE", "publish_rate", "publish-rate",
          ("Namespaces_getPublishRate", "Namespaces_setPublishRate", "Namespaces_removePublishRate"),
          ("Get the publish rate limit per topic partition",
           "Set the publish rate limit per topic partition (producers over it are paused, not failed)",
           "Remove the publish rate limit"),
          topic=_topic("publishRate", "PublishRate", "publish rate limit per partition", removed="publish rate limit",
                       applied=False),
          tenant_param="property"),
    _spec("dispatchRate", "DISPATCH_RATE", "dispatch_rate", "dispatch-rate",
          ("Namespaces_getDispatchRate", "Namespaces_setDispatchRate", "Namespaces_deleteDispatchRate"),
          ("Get the dispatch rate limit per topic partition",
           "Set the dispatch rate limit per topic partition (its subscriptions share it)",
           "Remove the dispatch rate limit"),
          topic=_topic("dispatchRate", "DispatchRate", "dispatch rate limit per partition", removed="dispatch rate limit")),
    _spec("maxProducersPerTopic", "MAX_PRODUCERS", "max_producers_per_topic", "max-producers-per-topic",
          ("Namespaces_getMaxProducersPerTopic", "Namespaces_setMaxProducersPerTopic",
           "Namespaces_removeMaxProducersPerTopic"),
          ("Get the most producers a topic of the namespace may have (0: no limit)",
           "Set the most producers a topic of the namespace may have (one more is refused: ProducerBusy)",
           "Remove the namespace's producer limit"),
          topic=_topic("maxProducers", "MaxProducers", cli="max-producers", summaries=(
              "Get the most producers the topic may have", "Set the most producers the topic may have",
              "Remove the topic's producer limit (its namespace's applies)"))),
    _spec("maxConsumersPerTopic", "MAX_CONSUMERS", "max_consumers_per_topic", "max-consumers-per-topic",
          ("Namespaces_getMaxConsumersPerTopic", "Namespaces_setMaxConsumersPerTopic",
           "Namespaces_removeMaxConsumersPerTopic"),
          ("Get the most consumers a topic of the namespace may have (0: no limit)",
           "Set the most consumers a topic of the namespace may have (one more is refused: ConsumerBusy)",
           "Remove the namespace's consumer limit"),
          topic=_topic("maxConsumers", "MaxConsumers", cli="max-consumers", summaries=(
              "Get the most consumers the topic may have", "Set the most consumers the topic may have",
              "Remove the topic's consumer limit (its namespace's applies)"))),
    _spec("deadLetterPolicy", "DEAD_LETTER", "dead_letter", "dead-letter-policy",
          ("Namespaces_getDeadLetterPolicy", "Namespaces_setDeadLetterPolicy", "Namespaces_removeDeadLetterPolicy"),
          ("Get the retry/dead-letter defaults (Magnetar)",
           "Set the retry/dead-letter defaults (Magnetar; all null: removed)",
           "Remove the retry/dead-letter defaults (Magnetar)"),
          default={"maxRedeliverCount": None, "retryLetterTopic": None, "deadLetterTopic": None,
                   "initialSubscriptionName": None}),
    _spec("schemaCompatibilityStrategy", "SCHEMA_COMPATIBILITY_STRATEGY", "schema_compatibility_strategy",
          "schema-compatibility-strategy",
          ("Namespaces_getSchemaCompatibilityStrategy", "Namespaces_setSchemaCompatibilityStrategy", None),
          ("Get the schema compatibility strategy (UNDEFINED: the broker's default applies)",
           "Set the schema compatibility strategy of the namespace's topics", None),
          set_method="PUT", removable=False, default="UNDEFINED"),
    _spec("isAllowAutoUpdateSchema", "IS_ALLOW_AUTO_UPDATE_SCHEMA", "is_allow_auto_update_schema",
          "is-allow-auto-update-schema",
          ("Namespaces_getIsAllowAutoUpdateSchema", "Namespaces_setIsAllowAutoUpdateSchema", None),
          ("Get whether producers may register new schema versions (default true)",
           "Let producers register new schema versions, or only use those uploaded", None),
          removable=False, default=True),
    _spec("schemaValidationEnforced", "SCHEMA_VALIDATION_ENFORCED", "schema_validation_enforced",
          "schema-validation-enforce",
          ("Namespaces_getSchemaValidtionEnforced", "Namespaces_setSchemaValidationEnforced", None),
          ("Get whether producers without a schema are refused on topics with one (default false)",
           "Refuse producers without a schema on topics that have one", None),
          removable=False, default=False),
    _spec("persistence", "PERSISTENCE", "persistence", "persistence",
          ("Namespaces_getPersistence", "Namespaces_setPersistence", "Namespaces_deletePersistence"),
          ("Get the bookkeeper quorums of the namespace's new ledgers",
           "Set the bookkeeper quorums of the namespace's new ledgers (ensemble >= write >= ack >= 1)",
           "Remove the namespace's persistence policies (the broker's quorums apply)")),
    _spec("compactionThreshold", "COMPACTION_THRESHOLD", "compaction_threshold", "compaction-threshold",
          ("Namespaces_getCompactionThreshold", "Namespaces_setCompactionThreshold",
           "Namespaces_deleteCompactionThreshold"),
          ("Get the bytes not yet compacted past which a topic is compacted automatically",
           "Set the bytes not yet compacted past which a topic is compacted automatically (0: never)",
           "Remove the compaction threshold (topics are compacted only when asked)"),
          set_method="PUT"),
    _spec("autoTopicCreation", "AUTO_TOPIC_CREATION", "auto_topic_creation", "auto-topic-creation",
          ("Namespaces_getAutoTopicCreation", "Namespaces_setAutoTopicCreation", "Namespaces_removeAutoTopicCreation"),
          ("Get the namespace's override of the brokers' topic auto-creation",
           "Override the brokers' topic auto-creation: allowed or not, partitioned (with how many partitions) "
           "or not", "Remove the override (the brokers' settings apply)")),
    _spec("inactiveTopicPolicies", "INACTIVE_TOPIC", "inactive_topic_policies", "inactive-topic-policies",
          ("Namespaces_getInactiveTopicPolicies", "Namespaces_setInactiveTopicPolicies",
           "Namespaces_removeInactiveTopicPolicies"),
          ("Get the inactive topic policies (whether and when unused topics are deleted)",
           "Set the inactive topic policies of the namespace's topics",
           "Remove the inactive topic policies (the broker's delete_inactive_topics_* apply)")),
)
BY_NAME: dict[str, PolicySpec] = {spec.name: spec for spec in CATALOGUE}
BY_VERB: dict[str, tuple[PolicySpec, str]] = {
    verb: (spec, verb.split("-", 1)[0]) for spec in CATALOGUE for verb in spec.verbs
}
"""``magnetar admin namespaces`` verb → (its policy, ``get``/``set``/``remove``)."""
TOPIC_CATALOGUE: tuple[PolicySpec, ...] = tuple(spec for spec in CATALOGUE if spec.topic is not None)
"""The entries Pulsar serves at a topic's level too."""
BY_TOPIC_VERB: dict[str, tuple[PolicySpec, str]] = {
    verb: (spec, verb.split("-", 1)[0]) for spec in TOPIC_CATALOGUE for verb in spec.topic_verbs
}
"""``magnetar admin topics`` verb → (its policy, ``get``/``set``/``remove``):
pulsar-admin's names (most the namespace verbs'; ``get-max-producers`` ...)."""


def effective(*levels: T | None, default: T) -> T:
    """The policy that applies: the first level (most specific first: topic, namespace)
    that sets it, else the broker's ``default``."""
    for value in levels:
        if value is not None:
            return value
    return default
