"""``-o json|yaml``: the API's messages as plain data, 64-bit integers as numbers."""

from __future__ import annotations

import json

import pytest
import yaml

from controlplane.cli.output import Output, print_item, render, to_data
from schema.gen.gpucap.v1 import control_plane_pb2 as pb

BIG = 2**53 + 1  # (past what a float holds exactly: the number must not go through one)


def test_64_bit_integers_are_numbers_everywhere_in_the_message() -> None:
    msg = pb.ListEventsResponse(events=[pb.Event(id=BIG, kind="node.ready"), pb.Event(id=7)])
    data = to_data(msg)
    assert [e["id"] for e in data["events"]] == [BIG, 7]
    decision = to_data(pb.ReplayDecisionResponse(decision=pb.Decision(id=BIG, desired=3)))
    assert decision["decision"]["id"] == BIG and decision["decision"]["desired"] == 3


def test_json_and_yaml_say_the_same() -> None:
    msg = pb.Status(version="1.2", models=3, nodes_by_state={"ready": 2, "draining": 1})
    data = to_data(msg)
    assert json.loads(render(data, Output.JSON)) == data
    assert yaml.safe_load(render(data, Output.YAML)) == data
    assert data["nodes_by_state"] == {"ready": 2, "draining": 1}


def test_times_stay_rfc3339_strings() -> None:
    e = pb.Event(id=1)
    e.at.FromSeconds(1_800_000_000)
    assert to_data(e)["at"] == "2027-01-15T08:00:00Z"


def test_which_outputs_are_structured() -> None:
    assert [o.value for o in Output if o.structured] == ["json", "yaml"]


def test_a_stream_prints_a_json_line_or_a_yaml_document_per_item(
    capsys: pytest.CaptureFixture[str],
) -> None:
    events = [pb.Event(id=BIG, kind="a"), pb.Event(id=2, kind="b")]
    for e in events:
        print_item(e, Output.JSON)
    lines = capsys.readouterr().out.splitlines()
    assert [json.loads(line)["id"] for line in lines] == [BIG, 2]
    for e in events:
        print_item(e, Output.YAML)
    docs = list(yaml.safe_load_all(capsys.readouterr().out))
    assert [(d["id"], d["kind"]) for d in docs] == [(BIG, "a"), (2, "b")]
