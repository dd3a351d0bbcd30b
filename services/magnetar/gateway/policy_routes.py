"""The policy routes, made from the catalogue (:mod:`magnetar.common.policies`).

:data:`BINDINGS` gives each catalogue entry its JSON side: the body model (Pulsar's JSON
names, validated by pydantic: a bad body is a 400/422 before any broker is asked), how
the body becomes the gRPC carrier, and how the answer is read from the broker's
``NamespacePolicies``. :func:`add_policy_routes` makes each entry's GET, its set (POST or
PUT, as Pulsar) and its DELETE (when Pulsar has one) from that, with the paths,
operationIds and codes of Pulsar's swagger. :func:`get_policy`, :func:`set_policy` and
:func:`remove_policy` are the calls behind them, over an ``AdminClient``; ``magnetar
admin namespaces`` calls the same ones when it speaks gRPC.

This module does not use ``from __future__ import annotations``: the endpoints' parameter
types are chosen per entry, and FastAPI reads them from the functions' annotations.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Protocol

from fastapi import APIRouter, Body, Query, Response
from pydantic import TypeAdapter

from magnetar.common.policies import CATALOGUE, PolicySpec
from magnetar.gateway.deps import Context, Namespace, PropertyNamespace
from magnetar.gateway.errors import responses
from magnetar.gateway.policy_models import (
    QUOTA_TYPES,
    BacklogQuota,
    DeadLetterPolicy,
    DelayedDeliveryPolicies,
    DispatchRate,
    InactiveTopicPolicies,
    Int32,
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


# -- the routes ------------------------------------------------------------------------
def add_policy_routes(router: APIRouter, catalogue: tuple[PolicySpec, ...] = CATALOGUE) -> None:
    """Add each entry's GET, set and DELETE to ``router`` (prefix
    ``/admin/v2/namespaces``)."""
    for spec in catalogue:
        _add(router, spec, BINDINGS[spec.name])


def _add(router: APIRouter, spec: PolicySpec, binding: PolicyBinding) -> None:
    ns_type: Any = PropertyNamespace if spec.tenant_param == "property" else Namespace
    base = f"/{{{spec.tenant_param}}}/{{namespace}}"
    get_id, set_id, remove_id = spec.operation_ids
    get_summary, set_summary, remove_summary = spec.summaries
    not_set = NOT_SET if spec.default is None and not spec.quota_typed else {}

    async def answer(namespace: str, ctx: Any) -> Any:
        value = await get_policy(ctx.admin, spec, namespace)
        return NO_CONTENT if value is None else value

    if binding.applied_query:
        async def get_route(
            namespace: ns_type, ctx: Context,
            applied: Annotated[bool, Query(description="accepted: the namespace's value or the default either way")] = False,
        ) -> Any:
            return await answer(namespace, ctx)
    else:
        async def get_route(namespace: ns_type, ctx: Context) -> Any:  # type: ignore[misc]
            return await answer(namespace, ctx)

    router.add_api_route(
        f"{base}/{spec.get_segment}", get_route, methods=["GET"], summary=get_summary, operation_id=get_id,
        response_model=binding.response, responses={**responses(404, 412), **not_set}, name=get_id)

    body_type: Any = binding.body
    if binding.optional_body is not None:
        body_type = Annotated[binding.body | None, Body()]

    if spec.quota_typed:
        async def set_route(
            namespace: ns_type, body: body_type, ctx: Context, backlogQuotaType: QuotaTypeQuery = None,  # noqa: N803
        ) -> Response:
            await set_policy(ctx.admin, spec, namespace, body, backlogQuotaType)
            return NO_CONTENT

        async def remove_route(
            namespace: ns_type, ctx: Context, backlogQuotaType: QuotaTypeQuery = None,  # noqa: N803
        ) -> Response:
            await remove_policy(ctx.admin, spec, namespace, backlogQuotaType)
            return NO_CONTENT
    else:
        if (no_body := binding.optional_body) is not None:
            async def set_route(namespace: ns_type, ctx: Context, body: body_type = None) -> Response:  # type: ignore[misc]
                await set_policy(ctx.admin, spec, namespace, body if body is not None else no_body())
                return NO_CONTENT
        else:
            async def set_route(namespace: ns_type, ctx: Context, body: body_type) -> Response:  # type: ignore[misc]
                await set_policy(ctx.admin, spec, namespace, body)
                return NO_CONTENT

        async def remove_route(namespace: ns_type, ctx: Context) -> Response:  # type: ignore[misc]
            await remove_policy(ctx.admin, spec, namespace)
            return NO_CONTENT

    router.add_api_route(
        f"{base}/{spec.name}", set_route, methods=[spec.set_method], status_code=204, summary=set_summary,
        operation_id=set_id, responses=responses(*binding.set_codes), name=set_id)
    if spec.removable:
        assert remove_id is not None
        router.add_api_route(
            f"{base}/{spec.name}", remove_route, methods=["DELETE"], status_code=204, summary=remove_summary,
            operation_id=remove_id, responses=responses(*binding.remove_codes), name=remove_id)
