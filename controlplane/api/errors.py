"""The errors a caller caused (as opposed to a bug or an outage); the gRPC server maps each
to a status code. A bad policy file is :class:`schema.policy_file.PolicyError` instead."""

from __future__ import annotations

from collections.abc import Iterable

from schema.policy import Problem, echo

# What one INVALID_ARGUMENT carries: the first violations, at most this many and about
# this many characters of reasons, then one counting the rest. The status travels in gRPC
# trailers twice (message and BadRequest), which gRPC refuses past 8 KB: a 5 KB name
# echoed back came out as RESOURCE_EXHAUSTED instead (issue 26).
MAX_VIOLATIONS = 20
MAX_VIOLATION_CHARS = 1500
MAX_REASON_CHARS = 500  # one reason (a validator's message could quote a whole value)
# The longest name or id a request may carry: names are at most 63 characters
# (schema.policy.Name), ids are gpucap's own ("n-" + 16 hex digits) or a pool's id (customer,
# account, cloud, region and instance type joined). Longer is never found; say so early.
MAX_NAME_CHARS = 512


class ServiceError(Exception):
    """Base of the errors a caller caused (as opposed to a bug or an outage)."""


class InvalidArgumentError(ServiceError):
    """One or more request fields are invalid. ``violations`` lists (field, reason) pairs in
    request order; ``field``/``reason`` are the first one."""

    def __init__(self, field: str, reason: str, *more: tuple[str, str]) -> None:
        self.violations: list[tuple[str, str]] = _first([(field, reason), *more])
        self.field, self.reason = self.violations[0]
        super().__init__("; ".join(f"{f}: {r}" if f else r for f, r in self.violations))

    @classmethod
    def from_problems(cls, problems: Iterable[Problem], prefix: str = "") -> InvalidArgumentError:
        pairs = [
            (prefix + p.field if p.path else prefix.rstrip(".") or p.field, p.reason)
            for p in problems
        ]
        return cls(*pairs[0], *pairs[1:])


def _first(violations: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """``violations`` within the bounds above (one at least), reasons cut to
    :data:`MAX_REASON_CHARS`, and a last one counting those left out."""
    kept: list[tuple[str, str]] = []
    used = 0
    for field, reason in violations:
        if len(reason) > MAX_REASON_CHARS:
            reason = reason[:MAX_REASON_CHARS] + "..."
        size = len(field) + len(reason)
        if len(kept) == MAX_VIOLATIONS or (kept and used + size > MAX_VIOLATION_CHARS):
            break
        kept.append((field, reason))
        used += size
    rest = len(violations) - len(kept)
    if rest:
        kept.append(("", f"{rest} more violation{'s' if rest != 1 else ''} not shown"))
    return kept


class NotFoundError(ServiceError):
    def __init__(self, kind: str, name: str) -> None:
        self.kind, self.name = kind, name
        super().__init__(f"{kind} {echo(name)} not found")


class AlreadyExistsError(ServiceError):
    def __init__(self, kind: str, name: str) -> None:
        self.kind, self.name = kind, name
        super().__init__(f"{kind} {echo(name)} already exists")


class UnauthenticatedError(ServiceError):
    """The caller's credential is missing, wrong, expired or spent."""


class PermissionDeniedError(ServiceError):
    """The caller is who it says, but may not act on this resource."""


class FailedPreconditionError(ServiceError):
    """The request is well-formed but the current state does not allow it."""


def require(field_name: str, value: str | None) -> None:
    if not value:
        raise InvalidArgumentError(field_name, "required")
    check_name(field_name, value)


def check_name(field_name: str, value: str | None) -> None:
    """A name or id from a request is at most :data:`MAX_NAME_CHARS` long (unset is fine)."""
    if value and len(value) > MAX_NAME_CHARS:
        raise InvalidArgumentError(
            field_name, f"longer than {MAX_NAME_CHARS} characters (got {echo(value)})"
        )


# The largest id the store holds: ids are signed 64-bit integers in SQLite and PostgreSQL,
# while the API's ids are uint64 (schema/proto), so 2^63 and up used to fail as INTERNAL.
MAX_ID = 2**63 - 1
# The largest id an event or decision row can have: their id columns are SQLAlchemy Integer
# (int4 on PostgreSQL, controlplane/store/models.py), so a larger id, though valid, names no
# row (and PostgreSQL refused to compare with it: "integer out of range", INTERNAL).
STORED_ID_MAX = 2**31 - 1


def check_id(field_name: str, value: int) -> None:
    if not 0 <= value <= MAX_ID:
        raise InvalidArgumentError(field_name, f"must be between 0 and {MAX_ID} (got {value})")
