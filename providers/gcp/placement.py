"""Compact placement policies, one per gang: find-or-create and idempotent delete.

A compact placement policy (a regional resource policy with ``groupPlacementPolicy.collocation
= COLLOCATED``) asks Compute Engine to place the instances that name it in
``resourcePolicies`` physically close together ("Reduce latency by using compact placement
policies"). ``vmCount`` is left unset: Google recommends it only when the policy must work
"only if it contains this exact number of VMs", and a gang that replaces a lost node must
still fit.

Identity: the name (:func:`providers.base.placement_name`, unique per project and region) is
the anchor. Create is *get*, then *insert*; a 409 ``alreadyExists`` on the insert means
another node of the gang (or this call, before its response was lost) made it, so it is read
back. Resource policies have no labels, so the ownership tags ride in ``description`` as JSON
(like the instances' ``gpucap-tags`` metadata), and garbage collection reads them there.
Every call is sent once (``retry=None``); ``provider.py`` is the one retry layer.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import structlog

from providers.base import NodeRequest, placement_name, placement_tags
from providers.errors import InvalidRequest, ProviderError, TransientError
from providers.gcp import errors as gerr
from providers.gcp.session import CALL_TIMEOUT_S, GcpSession, wait_region_operation

log = structlog.get_logger(__name__)

COLLOCATED = "COLLOCATED"


class GcpPlacement:
    def __init__(
        self,
        session: GcpSession,
        *,
        op_deadline_s: float = 120.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.session = session
        self.op_deadline_s = op_deadline_s
        self.sleep = sleep

    @property
    def _client(self) -> Any:
        return self.session.client("ResourcePoliciesClient")

    def ensure(self, req: NodeRequest) -> str:
        """The URL of the gang's compact placement policy (made if missing), for the
        instance's ``resource_policies``. Raw API errors propagate to the caller's mapping."""
        if not req.placement_group:
            raise ValueError("not a gang's request: placement_group is not set")
        name = placement_name(req.placement_group)
        policy = self._get(req.region, name) or self._insert(req, name)
        group = policy.group_placement_policy
        if not group or group.collocation != COLLOCATED:
            raise InvalidRequest(
                f"resource policy {name} in {req.region} exists but is not a compact "
                "placement policy",
                code="placementPolicyMismatch",
                region=req.region,
            )
        return str(policy.self_link)

    def _insert(self, req: NodeRequest, name: str) -> Any:
        from google.cloud import compute_v1

        where = gerr.Where(req.region, req.zone, req.instance_type)
        resource = compute_v1.ResourcePolicy(
            name=name,
            description=json.dumps(placement_tags(req), sort_keys=True),
            group_placement_policy=compute_v1.ResourcePolicyGroupPlacementPolicy(
                collocation=COLLOCATED
            ),
        )
        try:
            op = self._client.insert_unary(
                request=compute_v1.InsertResourcePolicyRequest(
                    project=self.session.project,
                    region=req.region,
                    resource_policy_resource=resource,
                ),
                retry=None,
                timeout=CALL_TIMEOUT_S,
            )
        except Exception as exc:
            found = self._get(req.region, name) if gerr.is_already_exists(exc) else None
            if found is not None:
                return found
            raise
        done = wait_region_operation(
            self.session, req.region, op, deadline_s=self.op_deadline_s, sleep=self.sleep
        )
        gerr.raise_unless_succeeded(done, op.name, f"placement policy {name} insert", where)
        found = self._get(req.region, name)
        if found is None:
            raise TransientError(
                f"placement policy {name} not visible after its insert finished",
                code="notVisible",
                retryable=True,
                region=req.region,
            )
        log.info("gcp.placement_policy.created", region=req.region, policy=name)
        return found

    def _get(self, region: str, name: str) -> Any | None:
        try:
            return self._client.get(
                project=self.session.project,
                region=region,
                resource_policy=name,
                retry=None,
                timeout=CALL_TIMEOUT_S,
            )
        except Exception as exc:
            if gerr.is_not_found(exc):
                return None
            raise

    def delete(self, region: str, key: str) -> None:
        """Idempotent: a policy that is gone is success; one still used by instances is a
        400 ``resourceInUseByAnotherResource``, raised as ``InUse``."""
        from google.cloud import compute_v1

        name = placement_name(key)
        where = gerr.Where(region)
        try:
            try:
                op = self._client.delete_unary(
                    request=compute_v1.DeleteResourcePolicyRequest(
                        project=self.session.project, region=region, resource_policy=name
                    ),
                    retry=None,
                    timeout=CALL_TIMEOUT_S,
                )
            except Exception as exc:
                if gerr.is_not_found(exc):
                    return
                raise
            done = wait_region_operation(
                self.session, region, op, deadline_s=self.op_deadline_s, sleep=self.sleep
            )
            gerr.raise_unless_succeeded(done, op.name, f"placement policy {name} delete", where)
            log.info("gcp.placement_policy.deleted", region=region, policy=name)
        except ProviderError:
            raise
        except Exception as exc:
            raise gerr.from_exception(exc, where) from exc
