"""gRPC ``ModelSpec`` carries every field of a policy file's model (``schema.policy.Model``),
nested messages included: a field added to the policy but not to the proto would be
dropped by DeployModel and missing from GetModel, with no error anywhere."""

from __future__ import annotations

import types
import typing
from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from pydantic import BaseModel

from controlplane.grpc.convert import spec_from_pb, spec_to_pb
from schema.gen.gpucap.v1 import control_plane_pb2 as pb
from schema.policy import Model


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model an annotation holds (``X``, ``X | None``, ``list[X]``), if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def _missing(model: type[BaseModel], message: Descriptor, path: str) -> list[str]:
    out = []
    for name, info in model.model_fields.items():
        field = message.fields_by_name.get(name)
        if field is None:
            out.append(f"{path}{name}")
            continue
        nested = _model_in(info.annotation)
        if nested is not None:
            assert field.type == FieldDescriptor.TYPE_MESSAGE, f"{path}{name}"
            out += _missing(nested, field.message_type, f"{path}{name}.")
    return out


def test_model_spec_has_every_policy_model_field() -> None:
    assert _model_in(int | None) is None and _model_in(types.NoneType) is None
    assert _missing(Model, pb.ModelSpec.DESCRIPTOR, "") == []


def test_a_complete_policy_model_converts_to_the_message_and_back() -> None:
    spec = Model.model_validate(
        {
            "name": "m",
            "shapes": [{"shape": "8xH100", "max_concurrency": 8}],
            "weights": {"uri": "s3://a/", "size_gb": 1, "mirrors": ["gs://a/"]},
            "staging": {"regions_ahead": 0, "enabled": False},
            "baked_image": {"enabled": False},
            "warm_pool": {"max_nodes": 9, "mode": "ready", "disk_gb": 64},
            "health": {"failure_threshold": 7, "timeout_s": 0.5, "drain_timeout_s": 0},
        }
    )
    stored = spec.model_dump(mode="json")
    again = Model.model_validate(spec_from_pb(spec_to_pb(stored)))
    assert again == spec
