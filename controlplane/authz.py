"""Who may call what: roles, the rule for every RPC, and the decision (allow, not found,
permission denied, unauthenticated). Pure: no I/O, no clock. The gRPC edge
(``controlplane.grpc.auth``) authenticates a call, finds the customer a request names and
applies the verdict.

Roles: ``admin`` (on-call, across customers) and ``customer:<name>`` (one customer's
deployment tooling). A customer caller is confined to its own customer: a request that
leaves the customer empty is answered for its own, and one naming another customer is
NOT_FOUND whether that customer exists or not, so no answer tells a tenant that another
exists. A verb beyond the role (on-call overrides, audit, the daemon's status) is
PERMISSION_DENIED before anything is looked up, as is a customer's change to its policy's
accounts or overflow (:func:`may_apply`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from schema.daemon_config import ROLE_PATTERN
from schema.policy import Policy, echo

SERVICE = "gpucap.v1.ControlPlane"
HEALTH = "grpc.health.v1.Health"
REFLECTION = "grpc.reflection.v1alpha.ServerReflection"

CUSTOMER_PREFIX = "customer:"


@dataclass(frozen=True)
class Role:
    """``customer`` None: admin."""

    customer: str | None = None

    @property
    def admin(self) -> bool:
        return self.customer is None

    def __str__(self) -> str:
        return "admin" if self.customer is None else f"{CUSTOMER_PREFIX}{self.customer}"


ADMIN = Role()


def parse_role(text: str) -> Role:
    """``admin`` or ``customer:<name>``; ValueError saying what is wrong otherwise."""
    if not re.fullmatch(ROLE_PATTERN, text):
        raise ValueError(
            f"role {text!r}: expected 'admin' or 'customer:<name>' (a customer's name: "
            "lowercase letters, digits and '-', at most 63)"
        )
    return ADMIN if text == "admin" else Role(text.removeprefix(CUSTOMER_PREFIX))


class Scope(StrEnum):
    """Where a request names the customer whose resources it touches."""

    NONE = "none"  # nothing of a customer's (health, reflection) or admin only
    CUSTOMER_FIELD = "customer_field"  # the request's `customer` (empty: the caller's own)
    POLICY_TEXT = "policy_text"  # the `customer:` of the policy file in the request
    # ... and, for a customer, the file keeps its active policy's accounts and overflow
    POLICY_APPLY = "policy_apply"
    DECISION = "decision"  # the customer of the recorded decision the request's id names
    NODE_TOKEN = "node_token"  # a booting node; its boot token in the request is the proof


@dataclass(frozen=True)
class Rule:
    customers: bool  # False: admin only
    scope: Scope


ADMIN_ONLY = Rule(customers=False, scope=Scope.NONE)
OWN = Rule(customers=True, scope=Scope.CUSTOMER_FIELD)

# Every method the server serves. A method without an entry is refused to every caller
# (tests/unit/test_authz.py fails for any RPC of the service without one).
RULES: Mapping[str, Rule] = {
    f"/{SERVICE}/{method}": rule
    for method, rule in {
        # A customer's platform team validates and applies its own policy file.
        "ValidatePolicy": Rule(customers=True, scope=Scope.POLICY_TEXT),
        "ApplyPolicy": Rule(customers=True, scope=Scope.POLICY_APPLY),
        "GetPolicy": OWN,
        "DeployModel": OWN,
        "UpdateModel": OWN,
        "DeleteModel": OWN,
        "GetModel": OWN,
        "ListModels": OWN,
        # On-call overrides act across customers' capacity: admin.
        "PinModel": ADMIN_ONLY,
        "PauseModel": ADMIN_ONLY,
        "CordonPool": ADMIN_ONLY,
        "CordonPools": ADMIN_ONLY,
        "DrainNode": ADMIN_ONLY,
        "ReportNodePhase": Rule(customers=False, scope=Scope.NODE_TOKEN),
        "ListDecisions": OWN,
        "ReplayDecision": Rule(customers=True, scope=Scope.DECISION),
        "ListNodes": OWN,
        "ListEndpoints": OWN,
        "WatchEndpoints": OWN,
        "ListPools": OWN,
        "ExplainModel": OWN,
        "ListStaging": OWN,
        "ListImages": OWN,
        "ListWarmPools": OWN,
        # Lists every cloud account's instances, shared accounts included.
        "Audit": ADMIN_ONLY,
        # Fleet-wide counts and the daemon's jobs; a tenant's liveness check is the
        # standard health service.
        "GetStatus": ADMIN_ONLY,
        "ListEvents": OWN,
        "StreamEvents": OWN,
        "GetUsage": OWN,  # (its rows are one customer's with the customer set)
    }.items()
} | {
    f"/{HEALTH}/Check": Rule(customers=True, scope=Scope.NONE),
    f"/{HEALTH}/List": Rule(customers=True, scope=Scope.NONE),
    f"/{HEALTH}/Watch": Rule(customers=True, scope=Scope.NONE),
    f"/{REFLECTION}/ServerReflectionInfo": Rule(customers=True, scope=Scope.NONE),
}


class Outcome(StrEnum):
    ALLOW = "allow"
    UNAUTHENTICATED = "unauthenticated"
    PERMISSION_DENIED = "permission_denied"
    NOT_FOUND = "not_found"


@dataclass(frozen=True)
class Verdict:
    outcome: Outcome
    message: str = ""
    # ALLOW for a customer caller: the customer the request is answered for (an empty
    # customer field is filled with it).
    customer: str | None = None


ALLOW = Verdict(Outcome.ALLOW)


def authorize(method: str, caller: Role | None) -> Verdict:
    """May ``caller`` (None: no valid credential) call ``method`` at all?"""
    rule = RULES.get(method)
    if rule is None:
        return Verdict(Outcome.PERMISSION_DENIED, f"{method} has no authorization rule")
    if rule.scope is Scope.NODE_TOKEN:
        return ALLOW  # (the service checks the node's boot token)
    if caller is None:
        return Verdict(Outcome.UNAUTHENTICATED, "missing, invalid, expired or revoked credential")
    if caller.admin:
        return ALLOW
    if not rule.customers:
        name = method.rsplit("/", 1)[-1]
        return Verdict(Outcome.PERMISSION_DENIED, f"{name} needs the admin role (caller: {caller})")
    return Verdict(Outcome.ALLOW, customer=caller.customer)


def scope(caller: Role, named: str | None) -> Verdict:
    """Is the customer a request names (``named``; None or empty: none) the caller's? For an
    allowed verb, after :func:`authorize`."""
    if caller.admin or not named or named == caller.customer:
        return Verdict(Outcome.ALLOW, customer=caller.customer)
    return Verdict(Outcome.NOT_FOUND, f"customer {echo(named)} not found")


def guarded_terms(policy: Policy) -> dict[str, Any]:
    """What a customer's policy may not change on a customer's own credential: its accounts
    (credentials name what gpucap's side holds: its shared accounts, profiles on the
    daemon's host) and its overflow onto gpucap's shared capacity (gpucap's spend)."""
    return {
        "accounts": [a.model_dump(mode="json") for a in policy.accounts],
        "overflow": policy.overflow.model_dump(mode="json"),
    }


def may_apply(caller: Role, new: Policy, active: Policy | None) -> Verdict:
    """May ``caller`` apply ``new`` over its customer's ``active`` policy (None: none yet)?"""
    if caller.admin:
        return ALLOW
    if new.customer != caller.customer:
        return Verdict(Outcome.NOT_FOUND, f"customer {echo(new.customer)} not found")
    if active is None:
        return Verdict(
            Outcome.PERMISSION_DENIED, "a customer's first policy is applied by an admin"
        )
    if guarded_terms(new) != guarded_terms(active):
        return Verdict(
            Outcome.PERMISSION_DENIED,
            "changing accounts or overflow needs the admin role; a customer may change the "
            "rest of its policy (models, limits)",
        )
    return Verdict(Outcome.ALLOW, customer=caller.customer)


# --------------------------------------------------------------------------- credentials

TOKEN_PREFIX = "gpct_"
_TOKEN = re.compile(r"^gpct_([0-9a-f]{16})_([A-Za-z0-9_-]{20,128})$")


@dataclass(frozen=True)
class TokenParts:
    id: str
    secret: str


def split_token(text: str) -> TokenParts | None:
    """``gpct_<id>_<secret>`` into its id (the lookup key) and secret; None otherwise."""
    m = _TOKEN.match(text)
    return None if m is None else TokenParts(m.group(1), m.group(2))


@dataclass(frozen=True)
class CertRoles:
    """How a verified client certificate maps to a role: a subject (a SAN URI or the
    subject's CN) named in ``subjects``; else, with ``spiffe_domain`` set, a SPIFFE id
    ``spiffe://<domain>/admin`` or ``spiffe://<domain>/customer/<name>``."""

    subjects: Mapping[str, Role]
    spiffe_domain: str | None = None


def role_from_certificate(
    roles: CertRoles, common_names: Sequence[str], uris: Sequence[str]
) -> Role | None:
    """The one role a certificate's names map to; None when none does, or when its names
    map to different roles (ambiguous: refused rather than guessed)."""
    found: set[Role] = set()
    for name in (*uris, *common_names):
        if name in roles.subjects:
            found.add(roles.subjects[name])
    if not found and roles.spiffe_domain:
        base = f"spiffe://{roles.spiffe_domain}/"
        for uri in uris:
            if not uri.startswith(base):
                continue
            path = uri.removeprefix(base)
            if path == "admin":
                found.add(ADMIN)
            elif path.startswith("customer/"):
                try:
                    found.add(parse_role(CUSTOMER_PREFIX + path.removeprefix("customer/")))
                except ValueError:
                    continue
    return found.pop() if len(found) == 1 else None
