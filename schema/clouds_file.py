"""The clouds file of ``gpucap simulate --full-loop --clouds FILE``: the pools the simulated
clouds offer (cloud, region, node shape or instance type, price, the cloud's stock, the
account's quota, nodes already committed), when they stock out, and how long a node there
takes to come up (per-pool changes to the cold-start phases, coldstart.md §0).

Errors name the file, line and field, as a policy file's do (``schema.policy_file``). Nothing
here does I/O except :func:`load_clouds_file`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from schema.catalog import INSTANCE_TYPES_BY_NAME, REGIONS, InstanceType, parse_gpu_shape
from schema.fleet import ColdStartOverride
from schema.policy import Problem
from schema.policy_file import PolicyError, locate, parse_yaml_model
from schema.types import Cloud, Owner

Seconds = Annotated[float, Field(ge=0)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class StockoutWindow(_Strict):
    """From ``start_s`` to ``end_s`` (seconds into the measured trace) the cloud has only
    ``capacity`` nodes of the pool's type in its region, or with ``zone`` in that zone:
    launches beyond it fail as a real stockout does (CapacityUnavailable). Nodes already
    running keep running."""

    start_s: Seconds
    end_s: Seconds
    capacity: Annotated[int, Field(ge=0)] = 0
    zone: str | None = None

    @model_validator(mode="after")
    def _ordered(self) -> StockoutWindow:
        if self.end_s <= self.start_s:
            raise ValueError(f"end_s ({self.end_s:g}) must be after start_s ({self.start_s:g})")
        return self


class CloudPool(_Strict):
    cloud: Cloud
    region: str
    # One of the two: the node shape (the cloud's cheapest instance type of it), or the type.
    shape: str | None = None
    instance_type: str | None = None
    owner: Owner = Owner.CUSTOMER  # shared: gpucap's capacity, used as overflow
    price_usd_per_hour: Annotated[float, Field(gt=0)] | None = None  # per node; else catalog
    capacity: Annotated[int, Field(ge=0)] | None = None  # the cloud's stock; None: unlimited
    quota: Annotated[int, Field(ge=0)] | None = None  # nodes the account may run; None: none
    committed: Annotated[int, Field(ge=0)] = 0  # nodes already paid for (the commit tier)
    coldstart: ColdStartOverride | None = None  # over each model's phases, here
    stockouts: list[StockoutWindow] = []

    @field_validator("shape")
    @classmethod
    def _known_shape(cls, v: str | None) -> str | None:
        if v is not None:
            parse_gpu_shape(v)
        return v

    @model_validator(mode="after")
    def _one_of(self) -> CloudPool:
        if (self.shape is None) == (self.instance_type is None):
            raise ValueError("give shape or instance_type (one of the two)")
        return self

    def node_type(self) -> InstanceType | None:
        """The pool's instance type, None when the cloud has none of that name or shape."""
        if self.instance_type is not None:
            it = INSTANCE_TYPES_BY_NAME.get(self.instance_type)
            return it if it is not None and it.cloud == self.cloud else None
        assert self.shape is not None
        found = parse_gpu_shape(self.shape).instance_types(self.cloud)
        return found[0] if found else None


class Overflow(_Strict):
    """How much of the shared pools the customer's models may use (the policy's overflow)."""

    max_replicas: Annotated[int, Field(ge=0)] = 1000
    max_usd_per_hour: Annotated[float, Field(ge=0)] | None = None


class Clouds(_Strict):
    pools: Annotated[list[CloudPool], Field(min_length=1)]
    overflow: Overflow = Overflow()


class CloudsError(Exception):
    """A clouds file that cannot be used; ``problems`` lists every reason with its line."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


def clouds_problems(clouds: Clouds, with_policy: bool = False) -> list[Problem]:
    """What per-field checks cannot see. Pure; document order. ``with_policy``: the
    simulation's accounts are a policy's, which say who owns a pool, its price, its
    commitments and the overflow, so the clouds file may not say so too."""
    return list(_problems(clouds, with_policy))


def _problems(c: Clouds, with_policy: bool) -> Iterator[Problem]:
    seen: set[tuple[str, str, str]] = set()
    for i, p in enumerate(c.pools):
        if p.region not in REGIONS[p.cloud]:
            yield Problem(
                ("pools", i, "region"),
                f"unknown {p.cloud.value} region {p.region!r} "
                f"(known: {', '.join(REGIONS[p.cloud])})",
            )
        it = p.node_type()
        if it is None:
            field = "instance_type" if p.instance_type is not None else "shape"
            offered = ", ".join(n for n, t in INSTANCE_TYPES_BY_NAME.items() if t.cloud == p.cloud)
            yield Problem(
                ("pools", i, field),
                f"{p.instance_type or p.shape!r} is not a {p.cloud.value} GPU node "
                f"(known: {offered})",
            )
            continue
        key = (p.cloud.value, p.region, it.name)
        if key in seen:
            yield Problem(("pools", i), f"{'/'.join(key)} is listed twice")
        seen.add(key)
        if p.capacity is not None and p.committed > p.capacity:
            yield Problem(
                ("pools", i, "committed"),
                f"committed ({p.committed}) is more than the pool's capacity ({p.capacity})",
            )
        if p.committed and p.owner == Owner.SHARED:
            yield Problem(("pools", i, "committed"), "a shared pool has no customer commitment")
        if with_policy:
            for name in ("owner", "price_usd_per_hour", "committed"):
                if name in p.model_fields_set:
                    yield Problem(
                        ("pools", i, name), "with --policy, the policy's accounts say this"
                    )
        for j, w in enumerate(p.stockouts):
            if w.zone is not None and not w.zone.startswith(p.region):
                yield Problem(
                    ("pools", i, "stockouts", j, "zone"), f"zone {w.zone!r} is not in {p.region}"
                )
    if with_policy and "overflow" in c.model_fields_set:
        yield Problem(("overflow",), "with --policy, the policy's overflow section says this")


def parse_clouds(text: str, source: str = "<clouds>", with_policy: bool = False) -> Clouds:
    """Parse and validate; raise :class:`CloudsError` listing every problem with its line."""
    try:
        clouds, doc = parse_yaml_model(text, Clouds, source, kind="Clouds")
    except PolicyError as exc:
        raise CloudsError(exc.problems) from exc
    problems = [locate(doc, p, source) for p in clouds_problems(clouds, with_policy)]
    if problems:
        raise CloudsError(problems)
    return clouds


def load_clouds_file(path: str | Path, with_policy: bool = False) -> Clouds:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CloudsError([Problem((), f"cannot read file: {exc}", file=str(p))]) from exc
    return parse_clouds(text, source=str(p), with_policy=with_policy)
