"""API-managed models: deploy, update and delete, each checked against the customer's policy
(:mod:`controlplane.api.fit`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import ValidationError
from sqlalchemy.orm import Session

from controlplane.api.errors import (
    AlreadyExistsError,
    FailedPreconditionError,
    InvalidArgumentError,
)
from controlplane.api.fit import check_fits
from controlplane.api.rows import find_model, live_model, model_view, policy_of
from controlplane.api.sync import add_model_pools, sync_pools
from controlplane.api.tx import Tx
from controlplane.api.views import ModelView
from controlplane.store.events import record_event
from controlplane.store.models import Model as ModelRow
from schema.policy import Model as ModelSpec
from schema.policy_file import problems_from_validation_error

# Which ModelSpec fields an UpdateModel mask may name (top level only).
UPDATABLE_MODEL_FIELDS = frozenset(ModelSpec.model_fields) - {"name"}


class Models:
    def __init__(self, tx: Tx) -> None:
        self._tx = tx

    def deploy(self, customer: str, spec: Mapping[str, Any]) -> ModelView:
        """Create a model through the API. It must fit the customer's active policy."""
        model = validate_model_spec(spec)

        def do(s: Session) -> ModelView:
            policy = policy_of(s, customer)
            row = find_model(s, customer, model.name)
            if row is not None and row.deleted_at is None:
                raise AlreadyExistsError("model", f"{customer}/{model.name}")
            check_fits(policy, model)
            now = self._tx.clock()
            spec_json = model.model_dump(mode="json")
            if row is None:
                row = ModelRow(
                    customer=customer,
                    name=model.name,
                    spec=spec_json,
                    source="api",
                    created_at=now,
                    updated_at=now,
                )
                s.add(row)
            else:  # re-deploying a deleted model reuses its row (and its history)
                row.spec, row.source, row.deleted_at, row.updated_at = spec_json, "api", None, now
            s.flush()
            add_model_pools(s, policy, model, now)
            record_event(
                s,
                now,
                "model.deployed",
                f"model {model.name} deployed through the API "
                f"(replicas {model.min_replicas}..{model.max_replicas})",
                customer=customer,
                model=model.name,
            )
            return model_view(s, row)

        return self._tx.write(do)

    def update(
        self, customer: str, spec: Mapping[str, Any], update_mask: Iterable[str] = ()
    ) -> ModelView:
        """Change an API-managed model: the fields named in ``update_mask`` (top-level spec
        fields), or the whole spec when the mask is empty."""
        mask = list(update_mask)
        name = spec.get("name") or ""
        if not name:
            raise InvalidArgumentError("spec.name", "required: names the model to update")
        for i, path in enumerate(mask):
            if path not in UPDATABLE_MODEL_FIELDS:
                raise InvalidArgumentError(
                    f"update_mask.paths[{i}]",
                    f"{path!r} is not an updatable model field "
                    f"(one of: {', '.join(sorted(UPDATABLE_MODEL_FIELDS))})",
                )

        def do(s: Session) -> ModelView:
            policy = policy_of(s, customer)
            row = live_model(s, customer, name)
            require_api_managed(row, "update")
            if mask:
                merged = dict(row.spec)
                for path in mask:
                    if path in spec:
                        merged[path] = spec[path]
                    else:  # named but unset: back to the default
                        merged.pop(path, None)
            else:
                merged = dict(spec)
            model = validate_model_spec(merged)
            check_fits(policy, model)
            now = self._tx.clock()
            new_spec = model.model_dump(mode="json")
            if new_spec == row.spec:
                return model_view(s, row)
            changed = sorted(k for k in new_spec if new_spec.get(k) != row.spec.get(k))
            row.spec, row.updated_at = new_spec, now
            s.flush()
            sync_pools(s, policy, now)
            record_event(
                s,
                now,
                "model.updated",
                f"model {name} updated: {', '.join(changed)}",
                customer=customer,
                model=name,
            )
            return model_view(s, row)

        return self._tx.write(do)

    def delete(self, customer: str, name: str) -> ModelView:
        """Mark an API-managed model deleted; the reconciler drains its replicas."""

        def do(s: Session) -> ModelView:
            row = live_model(s, customer, name)
            require_api_managed(row, "delete")
            now = self._tx.clock()
            row.deleted_at = row.updated_at = now
            s.flush()
            policy = policy_of(s, customer)
            sync_pools(s, policy, now)
            record_event(
                s,
                now,
                "model.deleted",
                f"model {name} deleted through the API; its replicas will drain",
                customer=customer,
                model=name,
            )
            return model_view(s, row)

        return self._tx.write(do)


def require_api_managed(row: ModelRow, verb: str) -> None:
    if row.source != "api":
        raise FailedPreconditionError(
            f"model {row.customer}/{row.name} is managed by the customer's policy file; "
            f"{verb} it there and run `gpucap policy apply`"
        )


def validate_model_spec(spec: Mapping[str, Any]) -> ModelSpec:
    try:
        return ModelSpec.model_validate(dict(spec))
    except ValidationError as exc:
        raise InvalidArgumentError.from_problems(
            problems_from_validation_error(exc), prefix="spec."
        ) from exc
