"""``magnetar admin schemas`` and the namespaces' schema policy commands, named as
pulsar-admin names them (CmdSchemas; CmdNamespaces' get/set-schema-compatibility-strategy,
get/set-is-allow-auto-update-schema, get/set-schema-validation-enforce).

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

STRATEGIES = ("UNDEFINED", "ALWAYS_INCOMPATIBLE", "ALWAYS_COMPATIBLE", "BACKWARD", "FORWARD", "FULL",
              "BACKWARD_TRANSITIVE", "FORWARD_TRANSITIVE", "FULL_TRANSITIVE")
_JSON_DEFINITIONS = {"AVRO", "JSON", "PROTOBUF", "PROTOBUF_NATIVE", "KEY_VALUE"}
SCHEMA_POLICY_ACTIONS = (
    "get-schema-compatibility-strategy", "set-schema-compatibility-strategy", "get-is-allow-auto-update-schema",
    "set-is-allow-auto-update-schema", "get-schema-validation-enforce", "set-schema-validation-enforce",
)


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
    else:
        answer = await admin.test_schema_compatibility(topic, read_payload(args.filename, topic))
        _print({"compatibility": answer.compatible, "schemaCompatibilityStrategy": answer.strategy})


async def run_schema_policies(admin: AdminClient | RestAdmin, args: argparse.Namespace) -> bool:
    """The namespaces' schema policy commands; False when ``args`` is none of them."""
    action, namespace = args.action, args.name
    if action == "get-schema-compatibility-strategy":
        print(await admin.schema_compatibility_strategy(namespace))
    elif action == "set-schema-compatibility-strategy":
        strategy = args.compatibility.strip().upper()
        if strategy not in STRATEGIES:
            raise InvalidArgument(f"unknown --compatibility {args.compatibility!r}; one of {', '.join(STRATEGIES)}")
        await admin.set_schema_compatibility_strategy(namespace, strategy)
    elif action == "get-is-allow-auto-update-schema":
        print(str(await admin.is_allow_auto_update_schema(namespace)).lower())
    elif action == "set-is-allow-auto-update-schema":
        await admin.set_is_allow_auto_update_schema(namespace, args.enable)
    elif action == "get-schema-validation-enforce":
        print(str(await admin.schema_validation_enforced(namespace)).lower())
    elif action == "set-schema-validation-enforce":
        await admin.set_schema_validation_enforced(namespace, args.enable)
    else:
        return False
    return True


def add_schema_commands(groups: argparse._SubParsersAction[Any]) -> None:
    """pulsar-admin's ``schemas`` get / upload / delete / compatibility."""
    schemas = groups.add_parser("schemas", help="manage topics' schemas").add_subparsers(dest="action", required=True)
    p = schemas.add_parser("get", help="print the latest schema (or a version, or every live one) as JSON")
    p.add_argument("name", metavar="TOPIC")
    p.add_argument("-v", "--version", type=int, metavar="N", help="this version")
    p.add_argument("-a", "--all-version", action="store_true", help="every version since the last delete")
    for action, help_text in (("upload", "register a schema (the namespace's compatibility strategy applies)"),
                              ("compatibility", "print whether a schema would be registered (stores nothing)")):
        p = schemas.add_parser(action, help=help_text)
        p.add_argument("name", metavar="TOPIC")
        p.add_argument("-f", "--filename", required=True, metavar="FILE",
                       help='a JSON file {"type": "AVRO", "schema": "<definition>", "properties": {}}')
    p = schemas.add_parser("delete", help="delete the topic's schema (earlier versions stay readable by number)")
    p.add_argument("name", metavar="TOPIC")
    p.add_argument("-f", "--force", action="store_true", help="accepted; the history is kept either way")


def add_schema_policy_commands(namespaces: argparse._SubParsersAction[Any]) -> None:
    """pulsar-admin's namespace schema policy commands."""
    for action, help_text in (
        ("get-schema-compatibility-strategy", "print the schema compatibility strategy (UNDEFINED: the broker's)"),
        ("get-is-allow-auto-update-schema", "print whether producers may register new schema versions"),
        ("get-schema-validation-enforce", "print whether producers without a schema are refused on topics with one"),
    ):
        namespaces.add_parser(action, help=help_text).add_argument("name", metavar="TENANT/NAMESPACE")
    p = namespaces.add_parser("set-schema-compatibility-strategy", help="set the schema compatibility strategy")
    p.add_argument("name", metavar="TENANT/NAMESPACE")
    p.add_argument("-c", "--compatibility", required=True, metavar="STRATEGY", help=", ".join(STRATEGIES))
    for action, help_text in (
        ("set-is-allow-auto-update-schema", "let producers register new schema versions (--enable) or not"),
        ("set-schema-validation-enforce", "refuse producers without a schema on topics with one (--enable) or not"),
    ):
        p = namespaces.add_parser(action, help=help_text)
        p.add_argument("name", metavar="TENANT/NAMESPACE")
        switch = p.add_mutually_exclusive_group(required=True)
        switch.add_argument("-e", "--enable", dest="enable", action="store_true", default=None)
        switch.add_argument("-d", "--disable", dest="enable", action="store_false")


def _print(doc: object) -> None:
    print(json.dumps(doc, indent=2))
