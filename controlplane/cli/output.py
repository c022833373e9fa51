"""``--output table|wide|json|yaml``: what a read command prints. JSON and YAML are the API's
messages as plain data (proto field names), with 64-bit integers as numbers: protobuf's JSON
mapping writes them as strings, which a script would have to convert back."""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Any

import typer
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.json_format import MessageToDict
from google.protobuf.message import Message


class Output(StrEnum):
    TABLE = "table"
    WIDE = "wide"  # the table with more columns, where a command has them
    JSON = "json"
    YAML = "yaml"

    @property
    def structured(self) -> bool:
        return self in (Output.JSON, Output.YAML)


_INT64 = {
    FieldDescriptor.TYPE_INT64,
    FieldDescriptor.TYPE_UINT64,
    FieldDescriptor.TYPE_SINT64,
    FieldDescriptor.TYPE_FIXED64,
    FieldDescriptor.TYPE_SFIXED64,
}
# Well-known types whose JSON form is a string or a number by design (times, durations).
_OPAQUE = {"google.protobuf.Timestamp", "google.protobuf.Duration", "google.protobuf.FieldMask"}


def to_data(message: Message) -> dict[str, Any]:
    """The message as JSON-ready data: every field (unset ones at their defaults), proto
    field names, 64-bit integers as ``int``."""
    data = MessageToDict(
        message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )
    _numbers(message.DESCRIPTOR, data)
    return data


def _numbers(descriptor: Descriptor, data: dict[str, Any]) -> None:
    for field in descriptor.fields:
        if field.name not in data:
            continue
        value = data[field.name]
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            val = field.message_type.fields_by_name["value"]
            for k, v in value.items():
                value[k] = _field(val, v)
        elif field.is_repeated:
            data[field.name] = [_field(field, v) for v in value]
        else:
            data[field.name] = _field(field, value)


def _field(field: FieldDescriptor, value: Any) -> Any:
    if field.type in _INT64 and isinstance(value, str):
        return int(value)
    if (
        field.message_type is not None
        and field.message_type.full_name not in _OPAQUE
        and isinstance(value, dict)
    ):
        _numbers(field.message_type, value)
    return value


def render(data: Any, output: Output) -> str:
    """``data`` (plain dicts and lists) as JSON or YAML text."""
    if output == Output.YAML:
        import yaml  # (only YAML output pays for the import)

        return str(yaml.safe_dump(data, sort_keys=False, allow_unicode=True)).rstrip("\n")
    return json.dumps(data, indent=2)


def print_data(message: Message | dict[str, Any] | list[Any], output: Output) -> None:
    data = to_data(message) if isinstance(message, Message) else message
    if isinstance(data, dict) and data.get("next_page_token") == "":
        del data["next_page_token"]  # (a list's pages merged: there is no next one)
    typer.echo(render(data, output))


def print_item(message: Message, output: Output) -> None:
    """One item of a stream: a JSON document a line, or a YAML document after ``---``."""
    if output == Output.YAML:
        typer.echo("---\n" + render(to_data(message), output))
    else:
        typer.echo(json.dumps(to_data(message)))
