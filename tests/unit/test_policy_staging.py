"""Staging's policy fields (a model's ``staging:``, ``weights.mirrors``, an account's
``staging:``): a good one parses, each bad value is one problem naming file, line, field."""

from __future__ import annotations

import pytest

from schema.policy_file import PolicyError, parse_policy
from schema.types import Cloud
from tests.policy_texts import STAGING_POLICY

GOOD = STAGING_POLICY


def test_staging_fields_parse_and_give_each_region_its_bucket() -> None:
    policy = parse_policy(GOOD, "p.yaml").policy
    acct = policy.accounts[0]
    assert acct.staging_uri("us-west-2") == "s3://acme-weights-us-west-2/gpucap-weights/"
    assert acct.staging is not None and acct.staging.price(Cloud.AWS) == 0.023
    model = policy.models[0]
    assert model.staging is not None and model.staging.regions_ahead == 1
    assert model.weights is not None
    assert model.weights.origin_for(Cloud.GCP) == "gs://acme-origin/llama/"
    assert model.weights.origin_for(Cloud.OCI) is None


CASES = {
    "one bucket for two regions": (
        "      bucket: acme-weights-{region}",
        "      bucket: acme-weights",
        "accounts[0].staging.bucket",
        "put {region} in the name",
    ),
    "bad bucket name": (
        "      bucket: acme-weights-{region}",
        "      bucket: Acme_Weights-{region}",
        "accounts[0].staging.bucket",
        "not a valid bucket name",
    ),
    "namespace on aws": (
        "      budget_gb: 1",
        "      budget_gb: 1\n      namespace: acme",
        "accounts[0].staging.namespace",
        "only oci buckets have a namespace",
    ),
    "zero budget": (
        "      budget_gb: 1",
        "      budget_gb: 0",
        "accounts[0].staging.budget_gb",
        "greater than 0",
    ),
    "mirror in the origin's cloud": (
        "      mirrors: [gs://acme-origin/llama/]",
        "      mirrors: [s3://acme-other/llama/]",
        "models[0].weights.mirrors[0]",
        "a second aws origin",
    ),
    "mirror that is no object store": (
        "      mirrors: [gs://acme-origin/llama/]",
        "      mirrors: [file:///mnt/llama]",
        "models[0].weights.mirrors[0]",
        "not an s3://, gs:// or oci:// object URI",
    ),
    "staging without weights": (
        "    weights:\n      uri: s3://acme-origin/llama/\n      size_gb: 0.016\n"
        "      mirrors: [gs://acme-origin/llama/]\n",
        "",
        "models[0].staging",
        "staging needs the model's weights",
    ),
    "regions_ahead out of range": (
        "      regions_ahead: 1",
        "      regions_ahead: 99",
        "models[0].staging.regions_ahead",
        "less than or equal to 20",
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=list(CASES))
def test_bad_staging_input_names_file_line_and_field(case: tuple[str, str, str, str]) -> None:
    old, new, field, reason = case
    assert GOOD.count(old) == 1
    text = GOOD.replace(old, new)
    with pytest.raises(PolicyError) as err:
        parse_policy(text, "policies/acme.yaml")
    [problem] = err.value.problems
    assert (problem.file, problem.field) == ("policies/acme.yaml", field)
    assert problem.line is not None and reason in problem.reason
