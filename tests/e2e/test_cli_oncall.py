"""``gpucap pin|unpin|pause|resume|cordon|uncordon`` against a running API server."""

from __future__ import annotations

import json

from tests.component.oncall_kit import add_replica
from tests.e2e.conftest import Daemon, Gpucap
from tests.policy_texts import edited, example_policy

EAST = "acme/acme-aws/us-east-1/p5.48xlarge"


def test_pin_pause_and_cordon_change_state_and_record_events(gpucap: Gpucap, api: Daemon) -> None:
    api.service.apply_policy(example_policy(), "p.yaml", "alice")

    pinned = gpucap("pin", "llama-70b", "6")
    assert pinned.exit_code == 0, pinned.output
    assert pinned.stdout.strip() == "acme/llama-70b: pinned to 6, autoscaling"
    assert api.service.get_model("acme", "llama-70b").row.pinned_replicas == 6
    data = json.loads(gpucap("unpin", "acme/llama-70b", "-o", "json").stdout)
    assert "pinned_replicas" not in data  # unset optional field
    assert api.service.get_model("acme", "llama-70b").row.pinned_replicas is None

    assert gpucap("pause", "llama-8b").stdout.strip() == "acme/llama-8b: not pinned, paused"
    assert api.service.get_model("acme", "llama-8b").row.paused
    assert gpucap("resume", "llama-8b").exit_code == 0
    assert not api.service.get_model("acme", "llama-8b").row.paused

    cordoned = gpucap("cordon", EAST, "--reason", "ICE storm")
    assert cordoned.stdout.strip() == f"{EAST}: cordoned"
    assert next(p for p in api.service.list_pools() if p.row.id == EAST).row.cordoned
    assert gpucap("uncordon", EAST).stdout.strip() == f"{EAST}: schedulable"

    kinds = [e.kind for e in api.service.events(limit=1000)]
    for kind in (
        "model.pinned",
        "model.unpinned",
        "model.paused",
        "model.resumed",
        "pool.cordoned",
        "pool.uncordoned",
    ):
        assert kind in kinds


def test_oncall_errors_are_clean(gpucap: Gpucap, api: Daemon) -> None:
    api.service.apply_policy(example_policy(), "p.yaml", "alice")
    api.service.apply_policy(edited(example_policy(), "customer: acme", "customer: beta"), "b", "x")

    ambiguous = gpucap("pause", "llama-8b")
    assert ambiguous.exit_code == 1 and "several customers (acme, beta)" in ambiguous.stderr
    missing = gpucap("pin", "ghost", "1")
    assert missing.exit_code == 1 and "no model named 'ghost'" in missing.stderr
    too_many = gpucap("pin", "acme/llama-8b", "999")
    assert too_many.exit_code == 1
    assert "replicas: 999 is above the model's max_replicas (16)" in too_many.stderr
    unknown_pool = gpucap("cordon", "acme/none/x/y")
    assert unknown_pool.exit_code == 1 and "not found" in unknown_pool.stderr
    for result in (ambiguous, missing, too_many, unknown_pool):
        assert "Traceback" not in result.output


def test_every_oncall_verb_records_its_reason_in_the_event(gpucap: Gpucap, api: Daemon) -> None:
    api.service.apply_policy(example_policy(), "p.yaml", "alice")
    rid = add_replica(api.store, "llama-70b", EAST, "ready", ["ready"])
    verbs = {
        "model.pinned": ("pin", "llama-70b", "3"),
        "model.unpinned": ("unpin", "llama-70b"),
        "model.paused": ("pause", "llama-8b"),
        "model.resumed": ("resume", "llama-8b"),
        "pool.cordoned": ("cordon", EAST),
        "pool.uncordoned": ("uncordon", EAST),
        "node.draining": ("drain", f"{rid}-n0", "--now"),
    }
    for kind, args in verbs.items():
        result = gpucap(*args, "--reason", f"ticket {kind}")
        assert result.exit_code == 0, result.output
    messages = {e.kind: e.message for e in api.service.events(limit=1000)}
    for kind in verbs:
        assert f"ticket {kind}" in messages[kind], messages[kind]
