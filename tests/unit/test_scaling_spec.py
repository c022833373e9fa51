"""A policy's model becomes the autoscaler's ScalingSpec: the target from the first shape,
the scaling behaviour from its ``scaling:`` block, the daemon's tuning where that is unset;
and its replicas, counted in capacity units of that first shape."""

from __future__ import annotations

from controlplane.loop.context import Tuning
from controlplane.loop.views import replica_counts, scaling_spec
from controlplane.store.models import Replica
from schema.policy import Model

SHAPES = [{"shape": "8xH100", "max_concurrency": 64}]


def test_the_scaling_block_reaches_the_autoscaler() -> None:
    model = Model.model_validate(
        {
            "name": "m",
            "shapes": SHAPES,
            "scaling": {
                "scale_up_delay_s": 30,
                "scale_down_delay_s": 900,
                "max_scale_up_rate": 3,
                "max_scale_down_rate": 4,
            },
        }
    )
    spec = scaling_spec(model, Tuning(scale_down_delay_s=45.0))
    assert (spec.scale_up_delay_s, spec.scale_down_delay_s) == (30.0, 900.0)
    assert (spec.max_scale_up_rate, spec.max_scale_down_rate) == (3.0, 4.0)
    assert spec.target_per_replica == 64 * 0.7


def test_without_a_scaling_block_the_daemon_defaults_apply() -> None:
    spec = scaling_spec(
        Model.model_validate({"name": "m", "shapes": SHAPES}), Tuning(scale_down_delay_s=45.0)
    )
    assert (spec.scale_up_delay_s, spec.scale_down_delay_s) == (0.0, 45.0)
    # Knative's rate limits (autoscalers.md §1.8).
    assert (spec.max_scale_up_rate, spec.max_scale_down_rate) == (1000.0, 2.0)


def test_replica_counts_are_capacity_units_of_the_first_shape() -> None:
    model = Model.model_validate(
        {
            "name": "m",
            "shapes": [*SHAPES, {"shape": "8xH200", "max_concurrency": 96}],
        }
    )

    def replica(shape: str, state: str) -> Replica:
        return Replica(id=f"{shape}-{state}", gpu_shape=shape, state=state)

    counts = replica_counts(
        [
            replica("8xH200", "ready"),  # 1.5
            replica("8xH200", "ready"),  # 1.5
            replica("8xH100", "ready"),  # 1
            replica("8xH200", "running"),  # ready + starting = 5.5 -> 5
            replica("8xH100", "pending"),  # all live = 6.5 -> 6
            replica("8xH200", "draining"),
        ],
        model,
    )
    assert (counts.ready, counts.starting, counts.provisioning) == (4, 1, 1)
    assert counts.live == 6 and counts.draining == 1  # never more than is there
    one_shape = Model.model_validate({"name": "m", "shapes": SHAPES})
    assert replica_counts([replica("8xH100", "ready")] * 3, one_shape).ready == 3
