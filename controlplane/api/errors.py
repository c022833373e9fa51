"""The errors a caller caused (as opposed to a bug or an outage); the gRPC server maps each
to a status code. A bad policy file is :class:`schema.policy_file.PolicyError` instead."""

from __future__ import annotations

from collections.abc import Iterable

from schema.policy import Problem


class ServiceError(Exception):
    """Base of the errors a caller caused (as opposed to a bug or an outage)."""


class InvalidArgumentError(ServiceError):
    """One or more request fields are invalid. ``violations`` lists (field, reason) pairs in
    request order; ``field``/``reason`` are the first one."""

    def __init__(self, field: str, reason: str, *more: tuple[str, str]) -> None:
        self.violations: list[tuple[str, str]] = [(field, reason), *more]
        self.field, self.reason = field, reason
        super().__init__("; ".join(f"{f}: {r}" for f, r in self.violations))

    @classmethod
    def from_problems(cls, problems: Iterable[Problem], prefix: str = "") -> InvalidArgumentError:
        pairs = [
            (prefix + p.field if p.path else prefix.rstrip(".") or p.field, p.reason)
            for p in problems
        ]
        return cls(*pairs[0], *pairs[1:])


class NotFoundError(ServiceError):
    def __init__(self, kind: str, name: str) -> None:
        self.kind, self.name = kind, name
        super().__init__(f"{kind} {name!r} not found")


class AlreadyExistsError(ServiceError):
    def __init__(self, kind: str, name: str) -> None:
        self.kind, self.name = kind, name
        super().__init__(f"{kind} {name!r} already exists")


class UnauthenticatedError(ServiceError):
    """The caller's credential is missing, wrong, expired or spent."""


class PermissionDeniedError(ServiceError):
    """The caller is who it says, but may not act on this resource."""


class FailedPreconditionError(ServiceError):
    """The request is well-formed but the current state does not allow it."""


def require(field_name: str, value: str | None) -> None:
    if not value:
        raise InvalidArgumentError(field_name, "required")
