"""One model schema: a fleet's model section may be written as a policy file's (``shapes``,
``latency_slo_ms``, ``target``, ...) plus what only a simulation needs, and the fleet's older
keys (``shape`` + ``slots``, ``slo_s``, ``target_utilization``) still read the same."""

from __future__ import annotations

import pytest

from controlplane.simulator.fullloop.scenario import fleet_policy, policy_model
from schema.fleet import FleetError, parse_fleet
from schema.policy import Model as PolicyModel
from schema.policy_file import parse_policy

OLD = """
models:
  - name: chat
    shape: 8xH100
    slots: 16
    slo_s: 0.5
    target_utilization: 0.6
    max_replicas: 20
    service: {per_request_s: 2.0}
"""

# The same model in the keys of a policy file's model section (examples/policy.yaml).
AS_POLICY = """
models:
  - name: chat
    shapes: [{shape: 8xH100, max_concurrency: 16}]
    latency_slo_ms: 500
    target: {utilization: 0.6}
    max_replicas: 20
    service: {per_request_s: 2.0}
"""


def test_policy_keys_read_as_the_fleets_own():
    old, new = (parse_fleet(t).models[0] for t in (OLD, AS_POLICY))
    assert (new.shape, new.slots, new.slo_s, new.target_utilization) == ("8xH100", 16, 0.5, 0.6)
    assert policy_model(new) == policy_model(old)
    assert new.usd_per_replica_hour == old.usd_per_replica_hour


def test_a_fleet_model_section_is_a_policy_model_section():
    """The model section minus the simulation's own keys validates as a policy's model."""
    text = AS_POLICY.replace("    service: {per_request_s: 2.0}\n", "")
    text += "    regions: [us-east-1]\n    priority: 300\n    image: vllm/vllm-openai:v0.6\n"
    policy = parse_policy(
        "customer: acme\naccounts:\n  - {name: a, cloud: aws, regions: [us-east-1], "
        'credentials: {role_arn: "arn:aws:iam::111122223333:role/g"}}\n' + text
    ).policy
    fleet = parse_fleet(
        text.replace("models:\n", "models:\n") + "    service: {per_request_s: 2}\n"
    )
    assert policy_model(fleet.models[0]) == policy.models[0]


def test_every_shape_option_reaches_the_full_loops_policy():
    fleet = parse_fleet(
        AS_POLICY.replace(
            "shapes: [{shape: 8xH100, max_concurrency: 16}]",
            "shapes: [{shape: 8xH100, max_concurrency: 16}, {shape: 8xH200, max_concurrency: 24}]",
        )
    )
    spec = fleet.models[0]
    assert (spec.shape, spec.slots) == ("8xH100", 16)  # the engine replays the first
    doc = fleet_policy(fleet, ["chat"])
    model = PolicyModel.model_validate(doc["models"][0])
    assert [(o.shape, o.max_concurrency) for o in model.shapes] == [
        ("8xH100", 16),
        ("8xH200", 24),
    ]
    priced = {name for acct in doc["accounts"] for name in acct["prices"]}
    assert len(priced) == 2  # each shape's cheapest instance type, with a price


def test_a_template_in_policy_keys_clones():
    fleet = parse_fleet(
        AS_POLICY.replace("models:\n  - name: chat\n", "template:\n").replace("\n    ", "\n  ")
    )
    clone = fleet.model("any")
    assert clone is not None and (clone.shape, clone.slots, clone.slo_s) == ("8xH100", 16, 0.5)
    assert [o.shape for o in clone.shape_options] == ["8xH100"]


@pytest.mark.parametrize(
    ("old", "new", "fragment"),
    [
        ("    slo_s: 0.5\n", "    slo_s: 0.5\n    latency_slo_ms: 500\n", "latency_slo_ms"),
        (
            "    slots: 16\n",
            "    slots: 8\n    shapes: [{shape: 8xH100, max_concurrency: 16}]\n",
            "give shapes",
        ),
        (
            "    target_utilization: 0.6\n",
            "    target: {metric: tokens_per_s, utilization: 0.6}\n",
            "concurrency targets only",
        ),
        ("    slo_s: 0.5\n", "    latency_slo_ms: fast\n", "latency_slo_ms must be"),
    ],
)
def test_conflicting_or_unreplayable_keys_name_the_model_and_line(old, new, fragment):
    with pytest.raises(FleetError) as err:
        parse_fleet(OLD.replace(old, new))
    text = str(err.value)
    assert fragment in text and "<fleet>:3:" in text and "models[0]" in text
