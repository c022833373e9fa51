"""Every class of bad policy input gets one problem naming file, line, column, field path and
reason (issue 2, item 8). Each case edits one line of a small valid policy, so the expected
line is found in the edited text rather than hard-coded."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from schema.policy import Problem
from schema.policy_file import PolicyError, load_policy_file, parse_policy
from tests.policy_texts import EXAMPLE_POLICY_PATH

BASE = """\
apiVersion: gpucap.dev/v1
kind: Policy
customer: acme
accounts:
  - name: acme-aws
    cloud: aws
    regions: [us-east-1, us-west-2]
    credentials:
      role_arn: arn:aws:iam::123456789012:role/gpucap
models:
  - name: llama-70b
    shapes:
      - shape: 8xH100
        max_concurrency: 64
    min_replicas: 1
    max_replicas: 4
"""
SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


@dataclass(frozen=True)
class Case:
    old: str
    new: str
    line_of: str  # the (edited) line the problem must point at
    column: int
    field: str
    reason: str  # must appear in the reason


CASES = {
    "yaml syntax error": Case(
        "    cloud: aws\n",
        "    cloud: aws: oops\n",
        "    cloud: aws: oops",
        15,
        "<document>",
        "YAML syntax error: mapping values are not allowed here",
    ),
    "unclosed flow sequence": Case(
        "regions: [us-east-1, us-west-2]",
        "regions: [us-east-1, us-west-2",
        "    credentials:",
        16,
        "<document>",
        "while parsing a flow sequence started at line 7",
    ),
    "wrong type": Case(
        "max_replicas: 4",
        "max_replicas: four",
        "    max_replicas: four",
        5,
        "models[0].max_replicas",
        "valid integer, unable to parse string as an integer (got 'four')",
    ),
    "unknown field": Case(
        "max_replicas: 4\n",
        "max_replicas: 4\n    colour: blue\n",
        "    colour: blue",
        5,
        "models[0].colour",
        "unknown field",
    ),
    "negative replica bound": Case(
        "min_replicas: 1",
        "min_replicas: -1",
        "    min_replicas: -1",
        5,
        "models[0].min_replicas",
        "greater than or equal to 0 (got -1)",
    ),
    "inverted replica bounds": Case(
        "min_replicas: 1",
        "min_replicas: 5",
        "    min_replicas: 5",
        5,
        "models[0].min_replicas",
        "min_replicas (5) is greater than max_replicas (4)",
    ),
    "scale-up rate limit that cannot scale up": Case(
        "max_replicas: 4\n",
        "max_replicas: 4\n    scaling:\n      max_scale_up_rate: 1\n",
        "      max_scale_up_rate: 1",
        7,
        "models[0].scaling.max_scale_up_rate",
        "greater than 1 (got 1)",
    ),
    "misspelled scaling field": Case(
        "max_replicas: 4\n",
        "max_replicas: 4\n    scaling:\n      scale_up_dealy_s: 30\n",
        "      scale_up_dealy_s: 30",
        7,
        "models[0].scaling.scale_up_dealy_s",
        "unknown field",
    ),
    "negative scale-down delay": Case(
        "max_replicas: 4\n",
        "max_replicas: 4\n    scaling: {scale_down_delay_s: -5}\n",
        "    scaling: {scale_down_delay_s: -5}",
        15,
        "models[0].scaling.scale_down_delay_s",
        "greater than or equal to 0 (got -5)",
    ),
    "unknown cloud": Case(
        "cloud: aws",
        "cloud: azure",
        "    cloud: azure",
        5,
        "accounts[0].cloud",
        "Input should be 'aws', 'gcp' or 'oci' (got 'azure')",
    ),
    "unknown region": Case(
        "us-west-2]",
        "us-middle-9]",
        "    regions: [us-east-1, us-middle-9]",
        26,
        "accounts[0].regions[1]",
        "unknown aws region 'us-middle-9' (known: us-east-1,",
    ),
    "model region outside its accounts": Case(
        "max_replicas: 4\n",
        "max_replicas: 4\n    regions: [eu-west-1]\n",
        "    regions: [eu-west-1]",
        15,
        "models[0].regions[0]",
        "region 'eu-west-1' is not in any account of this policy",
    ),
    "model cloud without an account": Case(
        "max_replicas: 4\n",
        "max_replicas: 4\n    clouds: [gcp]\n",
        "    clouds: [gcp]",
        14,
        "models[0].clouds[0]",
        "cloud 'gcp' has no account in this policy",
    ),
    "malformed GPU shape": Case(
        "8xH100",
        "8xH300",
        "      - shape: 8xH300",
        9,
        "models[0].shapes[0].shape",
        "unknown GPU shape '8xH300'",
    ),
    "GPU shape that does not exist": Case(
        "8xH100",
        "4xH100",
        "      - shape: 4xH100",
        9,
        "models[0].shapes[0].shape",
        "GPU shape '4xH100' does not exist: no cloud offers a node with 4 H100 GPUs",
    ),
    "secret in credentials": Case(
        "      role_arn",
        f"      aws_secret_access_key: {SECRET}\n      role_arn",
        f"      aws_secret_access_key: {SECRET}",
        7,
        "accounts[0].credentials.aws_secret_access_key",
        "secrets are not accepted in a policy: store a reference",
    ),
    "customer-owned account without a role": Case(
        "      role_arn: arn:aws:iam::123456789012:role/gpucap\n",
        "      profile: default\n",
        "    credentials:",
        5,
        "accounts[0].credentials.role_arn",
        "a customer-owned aws account needs role_arn",
    ),
    "the nodes' identity of another cloud": Case(
        "      role_arn: arn:aws:iam::123456789012:role/gpucap\n",
        "      role_arn: arn:aws:iam::123456789012:role/gpucap\n"
        "      node_service_account: nodes@p.iam.gserviceaccount.com\n",
        "      node_service_account: nodes@p.iam.gserviceaccount.com",
        7,
        "accounts[0].credentials.node_service_account",
        "not a aws credential reference (use: instance_profile, profile, role_arn)",
    ),
    "an instance profile that is not an instance profile's ARN": Case(
        "      role_arn: arn:aws:iam::123456789012:role/gpucap\n",
        "      role_arn: arn:aws:iam::123456789012:role/gpucap\n"
        "      instance_profile: arn:aws:iam::123456789012:role/gpucap-node\n",
        "      instance_profile: arn:aws:iam::123456789012:role/gpucap-node",
        7,
        "accounts[0].credentials.instance_profile",
        "should match pattern",
    ),
}


def test_base_policy_is_valid() -> None:
    loaded = parse_policy(BASE, "p.yaml")
    assert loaded.policy.customer == "acme" and len(loaded.sha256) == 64


@pytest.mark.parametrize("case", CASES.values(), ids=list(CASES))
def test_bad_input_names_file_line_field_and_reason(case: Case) -> None:
    assert BASE.count(case.old) == 1
    text = BASE.replace(case.old, case.new)

    with pytest.raises(PolicyError) as err:
        parse_policy(text, source="policies/acme.yaml")

    [problem] = err.value.problems
    assert problem.file == "policies/acme.yaml"
    assert problem.line == text.splitlines().index(case.line_of) + 1
    assert problem.column == case.column
    assert problem.field == case.field
    assert case.reason in problem.reason
    assert str(problem) == (
        f"policies/acme.yaml:{problem.line}:{problem.column}: {case.field}: {problem.reason}"
    )


def test_a_secret_value_is_never_echoed() -> None:
    text = BASE.replace("      role_arn", f"      secret_key: {SECRET}\n      role_arn")
    with pytest.raises(PolicyError) as err:
        parse_policy(text, "p.yaml")
    assert SECRET not in str(err.value)
    assert "secrets are not accepted" in err.value.problems[0].reason


def test_every_problem_is_reported_in_document_order() -> None:
    text = (
        BASE.replace("cloud: aws", "cloud: azure")
        .replace("max_replicas: 4", "max_replicas: -4")
        .replace("max_replicas: -4\n", "max_replicas: -4\n    colour: blue\n")
    )
    with pytest.raises(PolicyError) as err:
        parse_policy(text, "p.yaml")
    assert [(p.field, p.line) for p in err.value.problems] == [
        ("accounts[0].cloud", 6),
        ("models[0].max_replicas", 16),
        ("models[0].colour", 17),
    ]
    assert str(err.value).splitlines() == [str(p) for p in err.value.problems]


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "expected a mapping at top level, got an empty document"),
        ("- acme\n", "expected a mapping at top level, got a list"),
        ("acme\n", "expected a mapping at top level, got a single value (str)"),
        ("customer: acme\n", "required field is missing"),
        ("customer: acme\ncustomer: beta\naccounts: []\n", 'found duplicate key "customer"'),
    ],
)
def test_documents_that_are_not_policies(text: str, reason: str) -> None:
    with pytest.raises(PolicyError) as err:
        parse_policy(text, "p.yaml")
    first: Problem = err.value.problems[0]
    assert reason in first.reason and first.file == "p.yaml" and first.line is not None


def test_unreadable_file_is_a_problem_not_a_crash(tmp_path: Path) -> None:
    with pytest.raises(PolicyError) as err:
        load_policy_file(tmp_path / "missing.yaml")
    [problem] = err.value.problems
    assert problem.file.endswith("missing.yaml") and "cannot read file" in problem.reason
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"\xff\xfe\x00junk")
    with pytest.raises(PolicyError):
        load_policy_file(binary)


def test_example_policy_is_valid() -> None:
    loaded = load_policy_file(EXAMPLE_POLICY_PATH)
    policy = loaded.policy
    assert policy.overflow.enabled and {a.cloud.value for a in policy.accounts} == {
        "aws",
        "gcp",
        "oci",
    }
