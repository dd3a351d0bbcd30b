"""``Record`` and its field types: Avro record definitions written as Python classes,
the names and behaviour of pulsar-client's ``pulsar.schema`` (``Record``, ``String``,
``Integer``, ``Array`` …).

A ``Record`` subclass lists its fields as class attributes; :meth:`Record.schema` gives
the Avro definition as a dict, the same dict pulsar-client builds for the same class (the
same keys in the same order), so that both clients declare one identical schema for a
topic. A field is nullable (``["null", type]``) unless ``required=True``; ``default`` is
written into the definition only with ``required_default=True``. An ``Enum`` class as an
attribute is a :class:`CustomEnum` field, a ``Record`` class a nested record. Only the
fields a class declares itself count (as pulsar-client's, fields are not inherited).
"""

from __future__ import annotations

import copy
import enum
from abc import abstractmethod
from typing import Any


def _name_of(x: object) -> str:
    return getattr(x, "__name__", None) or str(x)


class Field:
    """One field of a :class:`Record`: its Avro type, Python type and default."""

    def __init__(self, default: Any = None, required: bool = False, required_default: bool = False) -> None:
        if default is not None:
            default = self.validate_type("default", default)
        self._default = default
        self._required = required
        self._required_default = required_default

    @abstractmethod
    def type(self) -> str: ...

    @abstractmethod
    def python_type(self) -> Any: ...

    def validate_type(self, name: str, val: Any) -> Any:
        """``val`` as the field keeps it. Raises TypeError for a value of another type."""
        if val is None and not self._required:
            return self.default()
        if not isinstance(val, self.python_type()):
            raise TypeError(f"Invalid type '{type(val)}' for field '{name}'. Expected: {_name_of(self.python_type())}")
        return val

    def schema(self) -> Any:
        return self.type()

    def schema_info(self, defined_names: set[str]) -> Any:
        return self.type()

    def default(self) -> Any:
        return self._default

    def required_default(self) -> bool:
        return self._required_default


class _Primitive(Field):
    _avro = ""
    _python: Any = object

    def type(self) -> str:
        return self._avro

    def python_type(self) -> Any:
        return self._python


class Null(_Primitive):
    _avro, _python = "null", type(None)

    def validate_type(self, name: str, val: Any) -> Any:
        if val is not None:
            raise TypeError(f"Field {name} is set to be None")
        return val


class Boolean(_Primitive):
    _avro, _python = "boolean", bool

    def default(self) -> Any:
        return False if self._default is None else self._default


class Integer(_Primitive):
    _avro, _python = "int", int


class Long(_Primitive):
    _avro, _python = "long", int


class Float(_Primitive):
    _avro, _python = "float", (float, int)


class Double(_Primitive):
    _avro, _python = "double", (float, int)


class Bytes(_Primitive):
    """Bytes; a str given is kept UTF-8 encoded (other values are not checked, as
    pulsar-client's are not)."""

    _avro, _python = "bytes", (bytes, str)

    def validate_type(self, name: str, val: Any) -> Any:
        return val.encode() if isinstance(val, str) else val


class String(_Primitive):
    """A string; bytes given are kept decoded (UTF-8)."""

    _avro, _python = "string", (str, bytes)

    def validate_type(self, name: str, val: Any) -> Any:
        if val is None and not self._required:
            return self.default()
        if not isinstance(val, (str, bytes)):
            raise TypeError(f"Invalid type '{type(val)}' for field '{name}'. Expected a string")
        return val.decode() if isinstance(val, bytes) else val


class CustomEnum(Field):
    """A field holding members of ``enum_type`` (given as the member, its name or its value)."""

    def __init__(self, enum_type: type[enum.Enum], default: Any = None, required: bool = False, required_default: bool = False) -> None:
        if not (isinstance(enum_type, type) and issubclass(enum_type, enum.Enum)):
            raise Exception(f"{_name_of(enum_type)} is not a valid Enum type")
        self.enum_type = enum_type
        self.values = {member.value: member for member in enum_type.__members__.values()}
        super().__init__(default, required, required_default)

    def type(self) -> str:
        return "enum"

    def python_type(self) -> Any:
        return self.enum_type

    def validate_type(self, name: str, val: Any) -> Any:
        if val is None:
            return None
        members = self.enum_type.__members__
        if type(val) is str:
            if val not in members:
                raise TypeError(f"Invalid enum value '{val}' for field '{name}'. Expected: {members.keys()}")
            return members[val]
        if type(val) is int:
            if val not in self.values:
                raise TypeError(f"Invalid enum value '{val}' for field '{name}'. Expected: {self.values.keys()}")
            return self.values[val]
        if not isinstance(val, self.enum_type):
            raise TypeError(f"Invalid type '{type(val)}' for field '{name}'. Expected: {_name_of(self.enum_type)}")
        return val

    def schema(self) -> Any:
        return self.schema_info(set())

    def schema_info(self, defined_names: set[str]) -> Any:
        name = self.enum_type.__name__
        if name in defined_names:  # Avro names a type once, then refers to it
            return name
        defined_names.add(name)
        return {"type": "enum", "name": name, "symbols": [m.name for m in self.enum_type]}


def _check_item_type(x: object) -> None:
    if isinstance(x, type) and not issubclass(x, Record) and not isinstance(x, Field):
        raise Exception(f"Argument {_name_of(x)} is not a Record or a Field")


def _item_schema(item: Any, defined_names: set[str]) -> Any:
    return item.schema_info(defined_names) if isinstance(item, (Array, Map, Record)) else item.type()


class Array(Field):
    def __init__(self, array_type: Any, default: Any = None, required: bool = False, required_default: bool = False) -> None:
        _check_item_type(array_type)
        self.array_type = array_type
        super().__init__(default=default, required=required, required_default=required_default)

    def type(self) -> str:
        return "array"

    def python_type(self) -> Any:
        return list

    def validate_type(self, name: str, val: Any) -> Any:
        if val is None:
            return None
        super().validate_type(name, val)
        if any(not isinstance(x, self.array_type.python_type()) for x in val):
            raise TypeError(f"Array field {name} items should all be of type {_name_of(self.array_type.type())}")
        return val

    def schema(self) -> Any:
        return self.schema_info(set())

    def schema_info(self, defined_names: set[str]) -> Any:
        return {"type": "array", "items": _item_schema(self.array_type, defined_names)}


class Map(Field):
    """A map with string keys."""

    def __init__(self, value_type: Any, default: Any = None, required: bool = False, required_default: bool = False) -> None:
        _check_item_type(value_type)
        self.value_type = value_type
        super().__init__(default=default, required=required, required_default=required_default)

    def type(self) -> str:
        return "map"

    def python_type(self) -> Any:
        return dict

    def validate_type(self, name: str, val: Any) -> Any:
        if val is None:
            return None
        super().validate_type(name, val)
        for k, v in val.items():
            if not isinstance(k, str):
                raise TypeError(f"Map keys for field {name}  should all be strings")
            if not isinstance(v, self.value_type.python_type()):
                raise TypeError(f"Map values for field {name} should all be of type {_name_of(self.value_type.python_type())}")
        return val

    def schema(self) -> Any:
        return self.schema_info(set())

    def schema_info(self, defined_names: set[str]) -> Any:
        return {"type": "map", "values": _item_schema(self.value_type, defined_names)}


_RESERVED = ("_default", "_required", "_required_default")


class RecordMeta(type):
    """Collects a Record class's fields (its own attributes that are fields, enums or records)."""

    def __new__(mcs, name: str, bases: tuple[type, ...], namespace: dict[str, Any]) -> RecordMeta:
        if bases:  # not Record itself
            fields: dict[str, Any] = {}
            for attr, value in namespace.items():
                if isinstance(value, enum.EnumMeta):
                    value = CustomEnum(value)  # type: ignore[arg-type]
                elif isinstance(value, RecordMeta):
                    value = value()  # a nested record is held as an instance
                if isinstance(value, (Record, Field)):
                    fields[attr] = value
            namespace["_fields"] = fields
            namespace["_required"] = False
        return super().__new__(mcs, name, bases, namespace)


class Record(metaclass=RecordMeta):
    """A record: subclass it with fields as class attributes; instances hold values.

    Keyword arguments set fields (a dict for a nested record, lists/maps of dicts for
    records in arrays/maps); the rest take their defaults. As a field of another record,
    ``default``, ``required`` and ``required_default`` are the field's options.
    """

    _avro_namespace: str | None = None
    """The Avro namespace of the record's definition (none by default)."""
    _sorted_fields = False
    """True: the definition lists fields sorted by name, else in declaration order."""
    _fields: dict[str, Any] = {}

    def __init__(self, default: Any = None, required_default: bool = False, required: bool = False, *args: Any, **kwargs: Any) -> None:
        self._required_default = required_default
        self._default = default
        self._required = required
        for name, field in self._fields.items():
            if name in kwargs:
                self.__setattr__(name, _from_kwarg(field, kwargs[name]))
            elif isinstance(field, Record):
                self.__setattr__(name, field)
            else:  # the default, not validated again
                object.__setattr__(self, name, field.default())

    @classmethod
    def schema(cls) -> dict[str, Any]:
        """The record's Avro definition (as pulsar-client's ``Record.schema()``)."""
        return cls.schema_info(set())

    @classmethod
    def schema_info(cls, defined_names: set[str]) -> Any:
        full = f"{cls._avro_namespace}.{cls.__name__}" if cls._avro_namespace is not None else cls.__name__
        if full in defined_names:
            return full
        defined_names.add(full)
        out: dict[str, Any] = {"type": "record", "name": cls.__name__}
        if cls._avro_namespace is not None:
            out["namespace"] = cls._avro_namespace
        fields: list[dict[str, Any]] = []
        out["fields"] = fields
        for name in sorted(cls._fields) if cls._sorted_fields else cls._fields:
            field = cls._fields[name]
            kind = field.schema_info(defined_names)
            if not field._required:
                kind = ["null", kind]
            if field.required_default():
                default = field.default()
                fields.append({"name": name, "default": default.name if isinstance(default, enum.Enum) else default, "type": kind})
            else:
                fields.append({"name": name, "type": kind})
        return out

    def __setattr__(self, key: str, value: Any) -> None:
        if key not in _RESERVED:
            if key not in self._fields:
                raise AttributeError(f"Cannot set undeclared field {key} on record")
            value = self._fields[key].validate_type(key, value)
        object.__setattr__(self, key, value)

    def __eq__(self, other: object) -> bool:
        return all(getattr(self, name) == getattr(other, name) for name in self._fields)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    __hash__ = None  # type: ignore[assignment]

    def __str__(self) -> str:
        return str(self.__dict__)

    def type(self) -> str:
        return type(self).__name__

    def python_type(self) -> Any:
        return type(self)

    def validate_type(self, name: str, val: Any) -> Any:
        if val is None and not self._required:
            return self.default()
        if not isinstance(val, type(self)):
            raise TypeError(f"Invalid type '{type(val)}' for sub-record field '{name}'. Expected: {_name_of(type(self))}")
        return val

    def default(self) -> Any:
        return self._default

    def required_default(self) -> bool:
        return self._required_default


def _record_from(template: Record, values: dict[str, Any]) -> Record:
    made = copy.copy(template)
    made.__init__(**values)  # type: ignore[misc]
    return made


def _from_kwarg(field: Any, value: Any) -> Any:
    """A constructor argument as the field keeps it: dicts become nested records."""
    if isinstance(field, Record) and isinstance(value, dict):
        return _record_from(field, value)
    if isinstance(field, Array) and isinstance(field.array_type, Record) and isinstance(value, list) and value and isinstance(value[0], dict):
        return [_record_from(field.array_type, item) for item in value]
    if isinstance(field, Map) and isinstance(field.value_type, Record) and isinstance(value, dict) and value \
            and isinstance(next(iter(value.values())), dict):  # fmt: skip
        return {k: _record_from(field.value_type, v) for k, v in value.items()}
    return value


def record_dict(obj: Record) -> dict[str, Any]:
    """A record's field values (without its options)."""
    return {k: v for k, v in obj.__dict__.items() if k not in _RESERVED}
