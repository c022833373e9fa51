"""The committed generated gRPC code must match what ``python -m schema.codegen`` produces."""

from __future__ import annotations

import difflib
from pathlib import Path

from schema import codegen


def test_committed_generated_code_is_up_to_date(tmp_path: Path) -> None:
    fresh_dir = tmp_path / "gen"
    codegen.generate(fresh_dir)
    fresh = codegen.snapshot(fresh_dir)
    committed = codegen.snapshot(codegen.GEN_DIR)

    assert sorted(committed) == sorted(fresh), "files differ: run `make proto` and commit"
    stale = {
        name: "".join(
            difflib.unified_diff(
                committed[name].splitlines(True), fresh[name].splitlines(True), n=1
            )
        )[:2000]
        for name in fresh
        if committed[name] != fresh[name]
    }
    assert not stale, f"schema/gen is stale, run `make proto` and commit:\n{stale}"


def test_generated_imports_resolve_inside_schema_gen() -> None:
    from schema.gen.gpucap.v1 import control_plane_pb2, control_plane_pb2_grpc

    assert control_plane_pb2.DESCRIPTOR.package == "gpucap.v1"
    assert control_plane_pb2_grpc.ControlPlaneStub is not None
    service = control_plane_pb2.DESCRIPTOR.services_by_name["ControlPlane"]
    assert {
        "ValidatePolicy",
        "ApplyPolicy",
        "GetPolicy",
        "DeployModel",
        "UpdateModel",
        "DeleteModel",
        "GetModel",
        "ListModels",
        "ListNodes",
        "ListPools",
        "GetStatus",
        "StreamEvents",
    } <= set(service.methods_by_name)
    assert service.methods_by_name["StreamEvents"].server_streaming
