"""The daemon config's ``lifecycle`` section: how long a refusal blocks an offering, the
create backoff and the provision timeout, reaching the loop's ``Tuning``; bad values are
refused naming the field."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from controlplane.daemon import tuning_of
from controlplane.loop.context import Tuning
from schema.daemon_config import DaemonConfig


def test_the_defaults_are_the_loops() -> None:
    t, d = tuning_of(DaemonConfig()), Tuning()
    assert (t.capacity_block_s, t.quota_block_s, t.provision_timeout_s) == (
        d.capacity_block_s,
        d.quota_block_s,
        d.provision_timeout_s,
    )


def test_configured_values_reach_the_loop() -> None:
    config = DaemonConfig.model_validate(
        {
            "intervals": {"reconcile_s": 5},
            "lifecycle": {
                "capacity_block_s": 60,
                "quota_block_s": 300,
                "auth_block_s": 120,
                "invalid_block_s": 600,
                "backoff_base_s": 1,
                "backoff_max_s": 30,
                "provision_timeout_s": 1200,
            },
        }
    )
    t = tuning_of(config)
    assert t.reconcile_s == 5
    assert (t.capacity_block_s, t.quota_block_s, t.auth_block_s, t.invalid_block_s) == (
        60,
        300,
        120,
        600,
    )
    assert (t.backoff_base_s, t.backoff_max_s, t.provision_timeout_s) == (1, 30, 1200)


@pytest.mark.parametrize(
    ("lifecycle", "field"),
    [
        ({"capacity_block_s": -1}, "capacity_block_s"),
        ({"provision_timeout_s": 5}, "provision_timeout_s"),
        ({"backoff_base_s": 10, "backoff_max_s": 5}, "backoff_max_s"),
        ({"stockout_s": 5}, "stockout_s"),
    ],
)
def test_bad_values_are_refused_naming_the_field(lifecycle: dict[str, float], field: str) -> None:
    with pytest.raises(ValidationError) as err:
        DaemonConfig.model_validate({"lifecycle": lifecycle})
    assert field in str(err.value)
