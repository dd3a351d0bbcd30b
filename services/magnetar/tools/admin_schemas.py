"""``magnetar admin schemas``, named as pulsar-admin names them (CmdSchemas; the
namespaces' schema policy verbs are made from the policy catalogue:
:mod:`magnetar.tools.admin_policies`).

``schemas upload`` and ``compatibility`` read pulsar-admin's schema file, Pulsar's
PostSchemaPayload ``{"type": "AVRO", "schema": "<definition>", "properties": {}}``.
``schemas get`` prints what pulsar-admin prints: the latest as ``{"version", "schemaInfo"}``,
``--version N`` that version's schemaInfo, ``--all-version`` a list of ``{"version",
"schemaInfo"}``; schemaInfo is ``{"name", "schema", "type", "timestamp", "properties"}``
with an AVRO/JSON/PROTOBUF definition (and KEY_VALUE's) as JSON. ``compatibility``
prints Pulsar's IsCompatibilityResponse (pulsar-admin prints nothing).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from magnetar.client.schema_json import definition_text, payload_to_proto, type_name
from magnetar.common.errors import InvalidArgument
from magnetar.common.names import TopicName
from magnetar.proto.v1 import broker_pb2 as pb

if TYPE_CHECKING:
    from magnetar.client.admin import AdminClient
    from magnetar.client.rest_admin import RestAdmin

_JSON_DEFINITIONS = {"AVRO", "JSON", "PROTOBUF", "PROTOBUF_NATIVE", "KEY_VALUE"}


def schema_info_json(schema: pb.TopicSchema, topic: str) -> dict[str, Any]:
    """pulsar-admin's SchemaInfo JSON of one version."""
    kind, text = type_name(schema.schema.type), definition_text(schema.schema)
    definition: Any = text
    if kind in _JSON_DEFINITIONS:
        try:
            definition = json.loads(text)
        except ValueError:
            pass
    return {"name": TopicName.parse(topic).local_name, "schema": definition, "type": kind,
            "timestamp": schema.timestamp_ms, "properties": dict(schema.schema.properties)}


def read_payload(filename: str, topic: str) -> pb.SchemaInfo:
    """pulsar-admin's schema file as the broker's SchemaInfo.

    Raises:
        InvalidArgument: the file cannot be read, is not JSON, or not a schema payload.
    """
    path = Path(filename)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InvalidArgument(f"cannot read schema file {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise InvalidArgument(f"schema file {path} is not JSON: {exc}") from None
    try:
        return payload_to_proto(doc, topic)
    except InvalidArgument as exc:
        raise type(exc)(f"schema file {path}: {exc.message}") from None


async def run_schemas(admin: AdminClient | RestAdmin, args: argparse.Namespace) -> None:
    action, topic = args.action, args.name
    if action == "get":
        if args.version is not None and args.all_version:
            raise InvalidArgument("give only one or neither of --version and --all-version")
        if args.all_version:
            _print([{"version": s.version, "schemaInfo": schema_info_json(s, topic)} for s in await admin.all_schemas(topic)])
        elif args.version is not None:
            if args.version < 0:
                raise InvalidArgument(f"--version must be 0 or more, not {args.version}")
            _print(schema_info_json(await admin.schema(topic, args.version), topic))
        else:
            latest = await admin.schema(topic)
            _print({"version": latest.version, "schemaInfo": schema_info_json(latest, topic)})
    elif action == "upload":
        await admin.post_schema(topic, read_payload(args.filename, topic))
    elif action == "delete":
        await admin.delete_schema(topic)  # --force: the history is kept either way (docs/schemas.md)
    elif action == "get-version":
        _print({"version": await admin.schema_version(topic, read_payload(args.filename, topic))})
    else:
        answer = await admin.test_schema_compatibility(topic, read_payload(args.filename, topic))
        _print({"compatibility": answer.compatible, "schemaCompatibilityStrategy": answer.strategy})


def add_schema_commands(groups: argparse._SubParsersAction[Any]) -> None:
    """pulsar-admin's ``schemas`` get / upload / delete / compatibility."""
    schemas = groups.add_parser("schemas", help="manage topics' schemas").add_subparsers(dest="action", required=True)
    p = schemas.add_parser("get", help="print the latest schema (or a version, or every live one) as JSON", operations=(
        "SchemasResource_getSchema", "SchemasResource_getSchema_1", "SchemasResource_getAllSchemas"))
    p.add_argument("name", metavar="TOPIC")
    p.add_argument("-v", "--version", type=int, metavar="N", help="this version")
    p.add_argument("-a", "--all-version", action="store_true", help="every version since the last delete")
    for action, help_text, operation in (
        ("upload", "register a schema (the namespace's compatibility strategy applies)", "SchemasResource_postSchema"),
        ("compatibility", "print whether a schema would be registered (stores nothing)", "SchemasResource_testCompatibility"),
        ("get-version", "print the version a schema is registered as (stores nothing)", "SchemasResource_getVersionBySchema"),
    ):
        p = schemas.add_parser(action, help=help_text, operations=(operation,))
        p.add_argument("name", metavar="TOPIC")
        p.add_argument("-f", "--filename", required=True, metavar="FILE",
                       help='a JSON file {"type": "AVRO", "schema": "<definition>", "properties": {}}')
    p = schemas.add_parser("delete", help="delete the topic's schema (earlier versions stay readable by number)",
                           operations=("SchemasResource_deleteSchema",))
    p.add_argument("name", metavar="TOPIC")
    p.add_argument("-f", "--force", action="store_true", help="accepted; the history is kept either way")


def _print(doc: object) -> None:
    print(json.dumps(doc, indent=2))
