"""``/lookup/v2/topic/{persistent|non-persistent}/{t}/{ns}/{topic}``: the broker that serves a topic, as
Pulsar's URLs (``pulsar://``, ``pulsar+ssl://``: pulsar-client's ``http://`` service URL
looks topics up here) and Magnetar's (``nativeUrl``: ``magnetar://``)."""

from __future__ import annotations

from fastapi import APIRouter, Request

from magnetar.common.errors import InvalidArgument
from magnetar.common.names import NON_PERSISTENT, PERSISTENT, TopicName
from magnetar.gateway.deps import Context, Topic
from magnetar.gateway.errors import HttpError, responses
from magnetar.gateway.models import LookupData

router = APIRouter(prefix="/lookup/v2/topic", tags=["lookup"])


@router.get("/{domain}/{tenant}/{namespace}/{topic}/bundle", summary="Get the namespace bundle a topic falls in",
            operation_id="TopicLookup_getNamespaceBundle", responses=responses(404, 405, 412))
async def get_namespace_bundle(domain: str, topic: Topic, ctx: Context) -> str:
    """The bundle's range, e.g. ``"0x40000000_0x80000000"`` (pulsar-admin topics bundle-range)."""
    if domain != "persistent":
        raise HttpError(405, f"Only persistent topics are served (not {domain!r})")
    return await ctx.admin.bundle_range(topic)


@router.get("/{domain}/{tenant}/{namespace}/{topic}", summary="Get the broker serving a topic",
            operation_id="TopicLookup_lookupTopicAsync", responses=responses(404, 405, 412))
async def lookup_topic(domain: str, tenant: str, namespace: str, topic: Topic, ctx: Context, request: Request) -> LookupData:
    if domain not in (PERSISTENT, NON_PERSISTENT):
        raise HttpError(405, f"Only persistent and non-persistent topics are served (not {domain!r})")
    topic = str(TopicName(domain, tenant, namespace, TopicName.parse(topic).local_name))  # its bundle is by full name
    if ctx.authenticator is not None:
        owner = await ctx.admin.lookup_owner(topic)  # the broker decides first: no namespace's existence shown to others
    await ctx.tenants.get_policies(tenant, namespace)  # TenantNotFound / NamespaceNotFound: 404
    if ctx.authenticator is None:
        owner = await ctx.admin.lookup_owner(topic)
    if not owner.address:
        raise InvalidArgument(f"no broker serves {topic}")
    # Pulsar's fields carry the owner's Pulsar protocol URLs, so that pulsar-client given
    # this gateway as its http:// service URL connects to the owner; nativeUrl (in Pulsar
    # a copy of brokerUrl, read by no client) carries Magnetar's own magnetar:// address.
    # An owner serving no Pulsar protocol is answered with that address in brokerUrl too.
    native = f"magnetar://{owner.address}"
    return LookupData(
        brokerUrl=owner.pulsar_url or native, brokerUrlTls=owner.pulsar_url_tls, nativeUrl=native,
        httpUrl=str(request.base_url).rstrip("/"),
    )  # fmt: skip
