"""The authorization table and decisions (controlplane/authz.py), without a server."""

from __future__ import annotations

from typing import Any

import pytest
from grpc_health.v1 import health_pb2
from grpc_reflection.v1alpha import reflection_pb2

from controlplane.authz import (
    ADMIN,
    RULES,
    SERVICE,
    CertRoles,
    Outcome,
    Role,
    Scope,
    authorize,
    may_apply,
    parse_role,
    role_from_certificate,
    scope,
    split_token,
)
from schema.gen.gpucap.v1 import control_plane_pb2 as pb

ACME, GLOBEX = Role("acme"), Role("globex")
SERVED = [
    pb.DESCRIPTOR.services_by_name["ControlPlane"],
    health_pb2.DESCRIPTOR.services_by_name["Health"],
    reflection_pb2.DESCRIPTOR.services_by_name["ServerReflection"],
]
METHODS = [f"/{s.full_name}/{m.name}" for s in SERVED for m in s.methods]


def test_every_served_method_has_a_rule_and_every_rule_a_method() -> None:
    missing = [m for m in METHODS if m not in RULES]
    assert not missing, f"RPCs without an authorization rule in controlplane/authz.py: {missing}"
    stale = sorted(set(RULES) - set(METHODS))
    assert not stale, f"rules for methods the server does not serve: {stale}"


def test_customer_field_rules_name_a_request_with_a_customer_field() -> None:
    service = pb.DESCRIPTOR.services_by_name["ControlPlane"]
    for m in service.methods:
        rule = RULES[f"/{SERVICE}/{m.name}"]
        if rule.scope is Scope.CUSTOMER_FIELD:
            field = m.input_type.fields_by_name.get("customer")
            assert field is not None and field.type == field.TYPE_STRING, m.name
        if rule.scope in (Scope.POLICY_TEXT, Scope.POLICY_APPLY):
            assert "yaml" in m.input_type.fields_by_name, m.name
        if rule.scope is Scope.DECISION:
            assert "id" in m.input_type.fields_by_name, m.name


def test_a_method_without_a_rule_is_refused_to_everyone() -> None:
    for caller in (ADMIN, ACME, None):
        assert authorize(f"/{SERVICE}/NoSuchRpc", caller).outcome is Outcome.PERMISSION_DENIED


@pytest.mark.parametrize("method", METHODS)
def test_each_method_by_role(method: str) -> None:
    rule = RULES[method]
    assert authorize(method, ADMIN).outcome is Outcome.ALLOW
    anonymous = authorize(method, None).outcome
    customer = authorize(method, ACME)
    if rule.scope is Scope.NODE_TOKEN:  # (the node's boot token is checked by the service)
        assert anonymous is Outcome.ALLOW
    else:
        assert anonymous is Outcome.UNAUTHENTICATED
    if rule.customers:
        assert customer.outcome is Outcome.ALLOW and customer.customer == "acme"
    elif rule.scope is not Scope.NODE_TOKEN:
        assert customer.outcome is Outcome.PERMISSION_DENIED
        assert "admin" in customer.message


def test_on_call_verbs_are_admin_only() -> None:
    for name in ("PinModel", "PauseModel", "CordonPool", "CordonPools", "DrainNode", "Audit"):
        assert authorize(f"/{SERVICE}/{name}", ACME).outcome is Outcome.PERMISSION_DENIED


def test_scope_own_empty_and_other_customer() -> None:
    assert scope(ACME, "acme").outcome is Outcome.ALLOW
    empty = scope(ACME, "")
    assert (empty.outcome, empty.customer) == (Outcome.ALLOW, "acme")
    other = scope(ACME, "globex")
    assert other.outcome is Outcome.NOT_FOUND and "globex" in other.message
    assert scope(ADMIN, "globex").outcome is Outcome.ALLOW


@pytest.mark.parametrize(
    ("text", "role"), [("admin", ADMIN), ("customer:acme", ACME), ("customer:a-1", Role("a-1"))]
)
def test_parse_role(text: str, role: Role) -> None:
    assert parse_role(text) == role
    assert str(role) == text


@pytest.mark.parametrize(
    "text", ["", "Admin", "customer:", "customer:Acme", "customer:-x", "root", "customer:a b"]
)
def test_parse_role_refuses(text: str) -> None:
    with pytest.raises(ValueError, match="role"):
        parse_role(text)


def test_split_token() -> None:
    secret = "Ab_-" * 10
    parts = split_token(f"gpct_0123456789abcdef_{secret}")
    assert parts is not None and (parts.id, parts.secret) == ("0123456789abcdef", secret)
    for bad in ("", "gpct_", "gpct_0123456789abcdef_", "gpcx_0123456789abcdef_" + secret):
        assert split_token(bad) is None
    assert split_token("gpct_0123456789ABCDEF_" + secret) is None


def test_certificate_roles() -> None:
    roles = CertRoles({"oncall": ADMIN, "spiffe://corp/ci": ACME}, spiffe_domain="gpucap.test")
    assert role_from_certificate(roles, ["oncall"], []) == ADMIN
    assert role_from_certificate(roles, ["x"], ["spiffe://corp/ci"]) == ACME
    assert role_from_certificate(roles, [], ["spiffe://gpucap.test/admin"]) == ADMIN
    assert role_from_certificate(roles, [], ["spiffe://gpucap.test/customer/globex"]) == GLOBEX
    # Another trust domain, a bad name, or nothing that maps: no role.
    assert role_from_certificate(roles, [], ["spiffe://evil.test/admin"]) is None
    assert role_from_certificate(roles, [], ["spiffe://gpucap.test/customer/Bad"]) is None
    assert role_from_certificate(roles, ["nobody"], []) is None
    # Names that map to two roles: refused rather than guessed.
    assert role_from_certificate(roles, ["oncall"], ["spiffe://corp/ci"]) is None
    # An explicit subject wins over the SPIFFE convention.
    assert role_from_certificate(roles, ["oncall"], ["spiffe://gpucap.test/customer/x"]) == ADMIN
    assert role_from_certificate(CertRoles({}), [], ["spiffe://gpucap.test/admin"]) is None


def test_the_table_in_docs_api_md_says_what_the_rules_say() -> None:
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "api.md").read_text()
    words = {
        Scope.CUSTOMER_FIELD: "own customer",
        Scope.POLICY_TEXT: "its own policy text",
        Scope.POLICY_APPLY: "its own policy, accounts and overflow unchanged",
        Scope.DECISION: "its own decisions",
        Scope.NODE_TOKEN: "node boot token",
    }
    rows = {}
    for line in doc.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("`"):
            rows[f"/{SERVICE}/{cells[0].strip('`')}"] = cells[2]
    expected = {
        method: (
            words[rule.scope] if rule.customers or rule.scope is Scope.NODE_TOKEN else "denied"
        )
        for method, rule in RULES.items()
        if method.startswith(f"/{SERVICE}/")
    }
    assert rows == expected


def test_a_customer_applies_its_policy_but_not_its_accounts_or_overflow() -> None:
    from schema.policy_file import parse_policy
    from tests.policy_texts import edited, example_policy

    def policy(text: str) -> Any:
        return parse_policy(text, source="p.yaml").policy

    active = policy(example_policy())
    models = policy(edited(example_policy(), "max_replicas: 40", "max_replicas: 30"))
    overflow = policy(edited(example_policy(), "max_usd_per_hour: 1000", "max_usd_per_hour: 9e9"))
    accounts = policy(edited(example_policy(), "profile: GPUCAP_SHARED", "profile: OTHER"))
    assert may_apply(ACME, models, active).outcome is Outcome.ALLOW
    for changed in (overflow, accounts):
        verdict = may_apply(ACME, changed, active)
        assert verdict.outcome is Outcome.PERMISSION_DENIED and "admin" in verdict.message
    assert may_apply(ACME, models, None).outcome is Outcome.PERMISSION_DENIED  # a first one
    assert may_apply(GLOBEX, models, active).outcome is Outcome.NOT_FOUND
    assert may_apply(ADMIN, overflow, None).outcome is Outcome.ALLOW
