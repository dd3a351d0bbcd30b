"""``ProtobufNativeSchema``: protobuf messages in their own binary encoding, declared as
Pulsar's Java client declares them (``ProtobufNativeSchemaData``: the message's file
and its imports as a base64 ``FileDescriptorSet``, the root message type's full name and
its file's name), as pulsar-client does.
"""

from __future__ import annotations

import base64
from typing import Any

from google.protobuf import descriptor_pb2
from google.protobuf.descriptor import Descriptor, FileDescriptor
from google.protobuf.message import Message as ProtobufMessage

from .schema import Schema, SchemaType


def _files(file: FileDescriptor, seen: set[str], into: descriptor_pb2.FileDescriptorSet) -> None:
    """``file`` and the files it imports, each after its imports."""
    if file.name in seen:
        return
    for dependency in file.dependencies:
        _files(dependency, seen, into)
    seen.add(file.name)
    proto = descriptor_pb2.FileDescriptorProto()
    file.CopyToProto(proto)
    into.file.append(proto)


def native_definition(descriptor: Descriptor) -> dict[str, str]:
    """The definition of a protobuf message type (Java's ``ProtobufNativeSchemaData``)."""
    files = descriptor_pb2.FileDescriptorSet()
    _files(descriptor.file, set(), files)
    return {
        "fileDescriptorSet": base64.b64encode(files.SerializeToString()).decode(),
        "rootMessageTypeName": descriptor.full_name,
        "rootFileDescriptorName": descriptor.file.name,
    }


class ProtobufNativeSchema(Schema):
    """Messages of one generated protobuf class."""

    def __init__(self, record_cls: type[ProtobufMessage]) -> None:
        if not (isinstance(record_cls, type) and issubclass(record_cls, ProtobufMessage)):
            raise TypeError(f"record_cls must be a protobuf Message subclass, got {record_cls!r}")
        super().__init__(record_cls, SchemaType.PROTOBUF_NATIVE, native_definition(record_cls.DESCRIPTOR), "PROTOBUF_NATIVE")

    def encode(self, obj: ProtobufMessage) -> bytes:
        self._validate_object_type(obj)
        return obj.SerializeToString()

    def decode(self, data: bytes) -> Any:
        return self._record_cls.FromString(data)

    def __str__(self) -> str:
        return f"ProtobufNativeSchema({self._record_cls.__name__})"
