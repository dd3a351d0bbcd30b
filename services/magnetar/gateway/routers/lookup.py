"""``/lookup/v2/topic/persistent/{t}/{ns}/{topic}``: the broker that serves a topic."""

from __future__ import annotations

from fastapi import APIRouter, Request

from magnetar.common.errors import InvalidArgument
from magnetar.gateway.deps import Context, Topic
from magnetar.gateway.errors import HttpError, responses
from magnetar.gateway.models import LookupData

router = APIRouter(prefix="/lookup/v2/topic", tags=["lookup"])


@router.get("/{domain}/{tenant}/{namespace}/{topic}", summary="Get the broker serving a topic",
            operation_id="TopicLookup_lookupTopicAsync", responses=responses(404, 405, 412))
async def lookup_topic(domain: str, tenant: str, namespace: str, topic: Topic, ctx: Context, request: Request) -> LookupData:
    if domain != "persistent":
        raise HttpError(405, f"Only persistent topics are served (not {domain!r})")
    if ctx.authenticator is not None:
        address = await ctx.admin.lookup(topic)  # the broker decides first: no namespace's existence shown to others
    await ctx.tenants.get_policies(tenant, namespace)  # TenantNotFound / NamespaceNotFound: 404
    if ctx.authenticator is None:
        address = await ctx.admin.lookup(topic)
    if not address:
        raise InvalidArgument(f"no broker serves {topic}")
    url = f"magnetar://{address}"
    return LookupData(brokerUrl=url, nativeUrl=url, httpUrl=str(request.base_url).rstrip("/"))
