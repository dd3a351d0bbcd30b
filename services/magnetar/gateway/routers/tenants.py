"""``/admin/v2/tenants``: list, get, create, update, delete (Pulsar's TenantsBase)."""

from __future__ import annotations

from fastapi import APIRouter, Response

from magnetar.gateway.deps import Context, Tenant
from magnetar.gateway.errors import responses
from magnetar.gateway.models import TenantInfo
from magnetar.proto.v1 import broker_pb2 as pb

router = APIRouter(prefix="/admin/v2/tenants", tags=["tenants"])
NO_CONTENT = Response(status_code=204)


def _info(body: TenantInfo) -> pb.TenantInfo:
    return pb.TenantInfo(admin_roles=body.adminRoles, allowed_clusters=body.allowedClusters)


@router.get("", summary="List the tenants", operation_id="TenantsBase_getTenants", responses=responses())
async def get_tenants(ctx: Context) -> list[str]:
    return sorted(await ctx.admin.tenants())


@router.get("/{tenant}", summary="Get a tenant's admin roles and allowed clusters",
            operation_id="TenantsBase_getTenantAdmin", responses=responses(404, 412))
async def get_tenant(tenant: Tenant, ctx: Context) -> TenantInfo:
    info = await ctx.admin.tenant(tenant)
    return TenantInfo(adminRoles=list(info.admin_roles), allowedClusters=list(info.allowed_clusters))


@router.put("/{tenant}", status_code=204, summary="Create a tenant", operation_id="TenantsBase_createTenant",
            responses=responses(400, 409, 412))
async def create_tenant(tenant: Tenant, body: TenantInfo, ctx: Context) -> Response:
    await ctx.admin.create_tenant(tenant, _info(body))
    return NO_CONTENT


@router.post("/{tenant}", status_code=204, summary="Update a tenant's admin roles and allowed clusters",
             operation_id="TenantsBase_updateTenant", responses=responses(400, 404, 412))
async def update_tenant(tenant: Tenant, body: TenantInfo, ctx: Context) -> Response:
    await ctx.admin.update_tenant(tenant, _info(body))
    return NO_CONTENT


@router.delete("/{tenant}", status_code=204, summary="Delete a tenant (it must have no namespaces)",
               operation_id="TenantsBase_deleteTenant", responses=responses(404, 409, 412))
async def delete_tenant(tenant: Tenant, ctx: Context) -> Response:
    await ctx.admin.delete_tenant(tenant)
    return NO_CONTENT
