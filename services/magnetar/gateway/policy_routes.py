"""The policy routes, made from the catalogue (:mod:`magnetar.common.policies`).

:data:`BINDINGS` gives each catalogue entry its JSON side: the body model (Pulsar's JSON
names, validated by pydantic: a bad body is a 400/422 before any broker is asked), how
the body becomes the gRPC carrier, and how the answer is read from the broker's
``NamespacePolicies``. :func:`add_policy_routes` makes each entry's GET, its set (POST or
PUT, as Pulsar) and its DELETE (when Pulsar has one) from that, with the paths,
operationIds and codes of Pulsar's swagger. :func:`get_policy`, :func:`set_policy` and
:func:`remove_policy` are the calls behind them, over an ``AdminClient``; ``magnetar
admin namespaces`` calls the same ones when it speaks gRPC.

:func:`add_topic_policy_routes` makes the topic level of the entries that have one
(``PolicySpec.topic``) from the same bindings: ``/admin/v2/persistent/{tenant}/
{namespace}/{topic}/<name>`` GET (``applied=true``: the topic's value over its
namespace's), POST and DELETE, over :func:`get_topic_policy`, :func:`set_topic_policy`
and :func:`remove_topic_policy` (``magnetar admin topics`` calls them too). One maker
makes the routes of both levels; what differs between them (paths, operationIds, the
calls, the topic level's ``isGlobal`` query) is a ``_Level``.

This module does not use ``from __future__ import annotations``: the endpoints' parameter
types are chosen per entry, and FastAPI reads them from the functions' annotations.
"""

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Protocol, get_args

from fastapi import APIRouter, Body, Depends, Query, Response
from fastapi.params import Body as FieldInfoBody
from pydantic import TypeAdapter

from magnetar.common.policies import CATALOGUE, TOPIC_CATALOGUE, PolicySpec
from magnetar.gateway.deps import Context, Namespace, PropertyNamespace, Topic
from magnetar.gateway.errors import responses
from magnetar.gateway.policy_models import (
    QUOTA_TYPES,
    AutoTopicCreationOverride,
    BacklogQuota,
    DeadLetterPolicy,
    DelayedDeliveryPolicies,
    DispatchRate,
    InactiveTopicPolicies,
    Int32,
    Int64,
    PersistencePolicies,
    Policies,
    PublishRate,
    QuotaTypeName,
    RetentionPolicies,
)
from magnetar.proto.v1 import broker_pb2 as pb

NO_CONTENT = Response(status_code=204)
NOT_SET: dict[int | str, dict[str, Any]] = {
    204: {"description": "The namespace does not set it (the broker's default applies)"},
}
QuotaTypeQuery = Annotated[
    QuotaTypeName | None, Query(description="which quota (absent: destination_storage)"),
]
StrategyName = Literal[
    "UNDEFINED", "ALWAYS_INCOMPATIBLE", "ALWAYS_COMPATIBLE", "BACKWARD", "FORWARD", "FULL",
    "BACKWARD_TRANSITIVE", "FORWARD_TRANSITIVE", "FULL_TRANSITIVE",
]


class PolicyAdmin(Protocol):
    """What the calls need of ``AdminClient``."""

    async def namespace_policies(self, namespace: str) -> pb.NamespacePolicies: ...

    async def set_namespace_policy(self, namespace: str, backlog_quota_type: Any = ..., **policy: Any) -> None: ...

    async def remove_namespace_policy(self, namespace: str, policy: Any, backlog_quota_type: Any = ...) -> None: ...

    async def topic_policies(self, topic: str, applied: bool = ...) -> pb.NamespacePolicies: ...

    async def set_topic_policy(self, topic: str, backlog_quota_type: Any = ..., **policy: Any) -> None: ...

    async def remove_topic_policy(self, topic: str, policy: Any, backlog_quota_type: Any = ...) -> None: ...


def _field(carrier: str, shown: Callable[[Any], Any] = lambda v: v) -> Callable[[pb.NamespacePolicies], Any]:
    """Read ``carrier`` of NamespacePolicies as ``shown(value)``; None when not set."""
    return lambda p: shown(getattr(p, carrier)) if p.HasField(carrier) else None


@dataclass(frozen=True)
class PolicyBinding:
    """A catalogue entry's JSON side (see the module's docstring)."""

    body: Any
    """The body's annotation (a model, or a JSON scalar type with its ``Body(...)``)."""
    response: Any
    """The GET's response model."""
    read: Callable[[pb.NamespacePolicies], Any]
    """The JSON value from the broker's policies; None: not set."""
    carried: Callable[[Any], Any] = lambda body: body
    """The validated body as the gRPC carrier's value."""
    optional_body: Callable[[], Any] | None = None
    """No body means this one (Pulsar's rates)."""
    set_codes: tuple[int, ...] = (400, 404, 412)
    remove_codes: tuple[int, ...] = (404, 412)
    applied_query: bool = False
    """The GET takes Pulsar's ``applied`` query (accepted; the answer is the same)."""

    def parse(self, body: Any) -> Any:
        """The JSON ``body`` validated as the route validates it (pydantic's
        ValidationError when bad)."""
        if body is None and self.optional_body is not None:
            return self.optional_body()
        return TypeAdapter(self.body).validate_python(body)


def _to_proto(body: Any) -> Any:
    return body.to_proto()


BINDINGS: dict[str, PolicyBinding] = {
    "retention": PolicyBinding(
        RetentionPolicies, RetentionPolicies, _field("retention", RetentionPolicies.of), _to_proto,
        set_codes=(400, 404, 409, 412), remove_codes=(404, 409, 412)),
    "messageTTL": PolicyBinding(
        Annotated[Int32, Body(description="seconds; 0: never expire")], int, _field("message_ttl_seconds")),
    "backlogQuota": PolicyBinding(
        BacklogQuota, dict[QuotaTypeName, BacklogQuota], lambda p: Policies.of(p).backlog_quota_map,
        _to_proto, set_codes=(400, 404, 409, 412), remove_codes=(400, 404, 409, 412)),
    "deduplication": PolicyBinding(Annotated[bool, Body(strict=True)], bool, _field("deduplication")),
    "delayedDelivery": PolicyBinding(
        DelayedDeliveryPolicies, DelayedDeliveryPolicies, _field("delayed_delivery", DelayedDeliveryPolicies.of),
        _to_proto),
    "publishRate": PolicyBinding(
        PublishRate, PublishRate, _field("publish_rate", PublishRate.of), _to_proto,
        optional_body=PublishRate),
    "dispatchRate": PolicyBinding(
        DispatchRate, DispatchRate, _field("dispatch_rate", DispatchRate.of), _to_proto,
        optional_body=DispatchRate),
    "deadLetterPolicy": PolicyBinding(
        DeadLetterPolicy, DeadLetterPolicy, _field("dead_letter", DeadLetterPolicy.of), _to_proto,
),
    "schemaCompatibilityStrategy": PolicyBinding(
        Annotated[StrategyName, Body(description='e.g. "FULL"')], str, _field("schema_compatibility_strategy")),
    "isAllowAutoUpdateSchema": PolicyBinding(
        Annotated[bool, Body(strict=True)], bool, _field("is_allow_auto_update_schema")),
    "schemaValidationEnforced": PolicyBinding(
        Annotated[bool, Body(strict=True)], bool, _field("schema_validation_enforced"),
        applied_query=True),
    "persistence": PolicyBinding(
        PersistencePolicies, PersistencePolicies, _field("persistence", PersistencePolicies.of), _to_proto,
        set_codes=(400, 404, 409), remove_codes=(404,)),
    "compactionThreshold": PolicyBinding(
        Annotated[Int64, Body(description="bytes not yet compacted; 0: never compact automatically")], int,
        _field("compaction_threshold"), set_codes=(404, 409, 412), remove_codes=(404, 409)),
    "autoTopicCreation": PolicyBinding(
        AutoTopicCreationOverride, AutoTopicCreationOverride,
        _field("auto_topic_creation", AutoTopicCreationOverride.of), _to_proto, remove_codes=(404,)),
    "maxProducersPerTopic": PolicyBinding(
        Annotated[Int32, Body(description="producers (0: no limit)")], int, _field("max_producers_per_topic")),
    "maxConsumersPerTopic": PolicyBinding(
        Annotated[Int32, Body(description="consumers (0: no limit)")], int, _field("max_consumers_per_topic")),
    "inactiveTopicPolicies": PolicyBinding(
        InactiveTopicPolicies, InactiveTopicPolicies,
        _field("inactive_topic_policies", InactiveTopicPolicies.of), _to_proto),
}


# -- the calls ---------------------------------------------------------------------------
async def get_policy(admin: PolicyAdmin, spec: PolicySpec, namespace: str) -> Any:
    """The policy's value; when the namespace does not set it, the entry's ``default``
    (None: the GET answers 204)."""
    value = BINDINGS[spec.name].read(await admin.namespace_policies(namespace))
    return spec.default if value is None else value


async def set_policy(
    admin: PolicyAdmin, spec: PolicySpec, namespace: str, body: Any, quota_type: QuotaTypeName | None = None,
) -> None:
    """Set the policy to ``body`` (already validated: see :meth:`PolicyBinding.parse`)."""
    binding = BINDINGS[spec.name]
    await admin.set_namespace_policy(
        namespace, QUOTA_TYPES[quota_type or "destination_storage"], **{spec.carrier: binding.carried(body)})


async def remove_policy(
    admin: PolicyAdmin, spec: PolicySpec, namespace: str, quota_type: QuotaTypeName | None = None,
) -> None:
    await admin.remove_namespace_policy(
        namespace, pb.NamespacePolicyKind.Value(f"POLICY_{spec.kind}"), QUOTA_TYPES[quota_type or "destination_storage"])


async def get_topic_policy(admin: PolicyAdmin, spec: PolicySpec, topic: str, applied: bool = False) -> Any:
    """What ``topic`` sets (``applied``: what applies, its namespace's when it sets
    none); None: neither (the GET answers 204)."""
    value = BINDINGS[spec.name].read(await admin.topic_policies(topic, applied))
    return spec.default if value is None else value


async def set_topic_policy(
    admin: PolicyAdmin, spec: PolicySpec, topic: str, body: Any, quota_type: QuotaTypeName | None = None,
) -> None:
    """Set the topic's policy to ``body`` (already validated)."""
    await admin.set_topic_policy(
        topic, QUOTA_TYPES[quota_type or "destination_storage"], **{spec.carrier: BINDINGS[spec.name].carried(body)})


async def remove_topic_policy(
    admin: PolicyAdmin, spec: PolicySpec, topic: str, quota_type: QuotaTypeName | None = None,
) -> None:
    await admin.remove_topic_policy(
        topic, pb.NamespacePolicyKind.Value(f"POLICY_{spec.kind}"), QUOTA_TYPES[quota_type or "destination_storage"])


# -- the routes ------------------------------------------------------------------------
IsGlobal = Annotated[bool, Query(description="accepted (one cluster: a local policy either way)")]
TOPIC_NOT_SET: dict[int | str, dict[str, Any]] = {
    204: {"description": "Not set (applied: neither the topic nor its namespace sets it; the broker's default applies)"},
}


async def _global_topic(topic: Topic, isGlobal: IsGlobal = False) -> str:  # noqa: N803
    """The topic of a topic-level policy route, which takes Pulsar's ``isGlobal`` too."""
    return topic


@dataclass(frozen=True)
class _Level:
    """What differs between a policy's routes at the namespace and at the topic level."""

    base: str
    target: Any
    """The annotation that gives the routes the namespace's or topic's name."""
    operation_ids: tuple[str, str, str | None]
    summaries: tuple[str, str, str | None]
    get_segment: str
    set_segment: str
    set_method: str
    removable: bool
    not_set: dict[int | str, dict[str, Any]]
    applied: str | None
    """The description of the GET's ``applied`` query (None: the GET takes none)."""
    value_query: str | None
    get: Callable[[PolicyAdmin, PolicySpec, str, bool], Awaitable[Any]]
    set: Callable[..., Awaitable[None]]
    remove: Callable[..., Awaitable[None]]


def _namespace_level(spec: PolicySpec, binding: PolicyBinding) -> _Level:
    return _Level(
        base=f"/{{{spec.tenant_param}}}/{{namespace}}",
        target=PropertyNamespace if spec.tenant_param == "property" else Namespace,
        operation_ids=spec.operation_ids, summaries=spec.summaries, get_segment=spec.get_segment,
        set_segment=spec.name, set_method=spec.set_method, removable=spec.removable,
        not_set=NOT_SET if spec.default is None and not spec.quota_typed else {},
        applied="accepted: the namespace's value or the default either way" if binding.applied_query else None,
        value_query=None, get=lambda admin, spec, namespace, applied: get_policy(admin, spec, namespace),
        set=set_policy, remove=remove_policy,
    )


def _topic_level(spec: PolicySpec, binding: PolicyBinding) -> _Level:
    level = spec.topic
    assert level is not None
    return _Level(
        base="/{tenant}/{namespace}/{topic}", target=Annotated[str, Depends(_global_topic)],
        operation_ids=level.operation_ids, summaries=level.summaries,
        get_segment=spec.get_name if spec.quota_typed and spec.get_name else level.name,
        set_segment=level.name, set_method="POST", removable=True, not_set=TOPIC_NOT_SET,
        applied="the value that applies: the topic's, else its namespace's" if level.applied else None,
        value_query=level.value_query, get=get_topic_policy, set=set_topic_policy, remove=remove_topic_policy,
    )


def add_policy_routes(router: APIRouter, catalogue: tuple[PolicySpec, ...] = CATALOGUE) -> None:
    """Add each entry's GET, set and DELETE to ``router`` (prefix
    ``/admin/v2/namespaces``)."""
    for spec in catalogue:
        _add(router, spec, BINDINGS[spec.name], _namespace_level(spec, BINDINGS[spec.name]))


def add_topic_policy_routes(router: APIRouter, catalogue: tuple[PolicySpec, ...] = TOPIC_CATALOGUE) -> None:
    """Add each entry's topic-level GET, POST and DELETE to ``router`` (prefix
    ``/admin/v2/persistent``)."""
    for spec in catalogue:
        _add(router, spec, BINDINGS[spec.name], _topic_level(spec, BINDINGS[spec.name]))


def _add(router: APIRouter, spec: PolicySpec, binding: PolicyBinding, level: _Level) -> None:
    """Add one entry's routes at one level."""
    target_type: Any = level.target
    get_id, set_id, remove_id = level.operation_ids
    get_summary, set_summary, remove_summary = level.summaries

    async def answer(target: str, ctx: Any, applied: bool) -> Any:
        value = await level.get(ctx.admin, spec, target, applied)
        return NO_CONTENT if value is None else value

    if level.applied is not None:
        async def get_route(
            target: target_type, ctx: Context, applied: Annotated[bool, Query(description=level.applied)] = False,
        ) -> Any:
            return await answer(target, ctx, applied)
    else:
        async def get_route(target: target_type, ctx: Context) -> Any:  # type: ignore[misc]
            return await answer(target, ctx, False)

    router.add_api_route(
        f"{level.base}/{level.get_segment}", get_route, methods=["GET"], summary=get_summary, operation_id=get_id,
        response_model=binding.response, responses={**responses(404, 412), **level.not_set}, name=get_id)

    body_type: Any = binding.body
    if binding.optional_body is not None:
        body_type = Annotated[binding.body | None, Body()]

    if spec.quota_typed:
        async def set_route(
            target: target_type, body: body_type, ctx: Context, backlogQuotaType: QuotaTypeQuery = None,  # noqa: N803
        ) -> Response:
            await level.set(ctx.admin, spec, target, body, backlogQuotaType)
            return NO_CONTENT

        async def remove_route(
            target: target_type, ctx: Context, backlogQuotaType: QuotaTypeQuery = None,  # noqa: N803
        ) -> Response:
            await level.remove(ctx.admin, spec, target, backlogQuotaType)
            return NO_CONTENT
    else:
        if level.value_query is not None:
            value_type: Any = Annotated[
                _without_body(binding.body), Query(alias=level.value_query, description=set_summary)]

            async def set_route(target: target_type, ctx: Context, value: value_type) -> Response:  # type: ignore[misc]
                await level.set(ctx.admin, spec, target, value)
                return NO_CONTENT
        elif (no_body := binding.optional_body) is not None:
            async def set_route(target: target_type, ctx: Context, body: body_type = None) -> Response:  # type: ignore[misc]
                await level.set(ctx.admin, spec, target, body if body is not None else no_body())
                return NO_CONTENT
        else:
            async def set_route(target: target_type, ctx: Context, body: body_type) -> Response:  # type: ignore[misc]
                await level.set(ctx.admin, spec, target, body)
                return NO_CONTENT

        async def remove_route(target: target_type, ctx: Context) -> Response:  # type: ignore[misc]
            await level.remove(ctx.admin, spec, target)
            return NO_CONTENT

    router.add_api_route(
        f"{level.base}/{level.set_segment}", set_route, methods=[level.set_method], status_code=204,
        summary=set_summary, operation_id=set_id, responses=responses(*binding.set_codes), name=set_id)
    if level.removable:
        assert remove_id is not None
        router.add_api_route(
            f"{level.base}/{level.set_segment}", remove_route, methods=["DELETE"], status_code=204,
            summary=remove_summary, operation_id=remove_id, responses=responses(*binding.remove_codes), name=remove_id)


def _without_body(annotation: Any) -> Any:
    """``annotation`` without its ``Body(...)`` (the value comes in a query)."""
    base, *meta = get_args(annotation) or (annotation,)
    kept = [m for m in meta if not isinstance(m, FieldInfoBody)]
    return Annotated[(base, *kept)] if kept else base  # type: ignore[valid-type]
