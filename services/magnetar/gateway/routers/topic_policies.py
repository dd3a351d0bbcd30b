"""Topic-level policies: ``/admin/v2/persistent/{tenant}/{namespace}/{topic}/<policy>``
(Pulsar's PersistentTopics get/set/remove of retention, messageTTL, backlogQuota,
deduplicationEnabled, delayedDelivery, publishRate and dispatchRate), made from the policy
catalogue by :func:`magnetar.gateway.policy_routes.add_topic_policy_routes`."""

from __future__ import annotations

from fastapi import APIRouter

from magnetar.gateway.policy_routes import add_topic_policy_routes

router = APIRouter(prefix="/admin/v2/persistent", tags=["persistent topic"])
add_topic_policy_routes(router)
