"""Account includes in policy files (schema/policy_includes.py): expansion, line numbers,
versioning, and every way an include can be wrong."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from controlplane.cli.main import app
from schema.account_file import load_account_file
from schema.policy_file import PolicyError, load_policy_file
from schema.policy_includes import expand_account_includes, read_policy_text

ROOT = Path(__file__).resolve().parents[2]

ACCOUNT = """\
name: acme-aws
customer: acme
cloud: aws
owner: customer
regions: [us-east-1, us-west-2]
credentials:
  role_arn: arn:aws:iam::123456789012:role/gpucap-provisioner
images:
  us-east-1: ami-0123456789abcdef0
"""

POLICY = """\
customer: acme
accounts:
  - file: accounts/acme-aws.yaml   # included
  - name: other
    cloud: aws
    owner: shared
    regions: [us-east-1]
models:
  - name: m
    shapes: [{shape: 8xH100, max_concurrency: 4}]
    max_replicas: 3
"""


def _tree(tmp_path: Path, policy: str = POLICY, account: str = ACCOUNT) -> Path:
    (tmp_path / "accounts").mkdir(exist_ok=True)
    (tmp_path / "accounts" / "acme-aws.yaml").write_text(account)
    path = tmp_path / "policy.yaml"
    path.write_text(policy)
    return path


def _problems(path: Path) -> list[str]:
    with pytest.raises(PolicyError) as info:
        load_policy_file(path)
    return [str(p) for p in info.value.problems]


def test_include_is_expanded_into_the_policy(tmp_path: Path) -> None:
    loaded = load_policy_file(_tree(tmp_path))
    acct = loaded.policy.account("acme-aws")
    assert acct is not None
    assert acct.regions == ["us-east-1", "us-west-2"]
    assert acct.credentials.role_arn == "arn:aws:iam::123456789012:role/gpucap-provisioner"
    assert [a.name for a in loaded.policy.accounts] == ["acme-aws", "other"]
    # Self-contained: the stored text no longer needs the account file.
    assert "file:" not in loaded.raw
    assert "# from accounts/acme-aws.yaml" in loaded.raw
    assert "images" not in loaded.raw and "customer: acme\n" in loaded.raw


def test_lines_after_an_include_keep_their_numbers(tmp_path: Path) -> None:
    path = _tree(tmp_path, policy=POLICY.replace("max_replicas: 3", "max_replicas: -3"))
    [problem] = _problems(path)
    assert problem.startswith(f"{path}:11:5: models[0].max_replicas:")


def test_editing_the_account_file_makes_a_new_version(tmp_path: Path) -> None:
    path = _tree(tmp_path)
    before = load_policy_file(path).sha256
    _tree(tmp_path, account=ACCOUNT.replace("us-east-1, us-west-2", "us-east-1"))
    assert load_policy_file(path).sha256 != before


def test_problem_inside_the_included_file_names_that_file_and_line(tmp_path: Path) -> None:
    path = _tree(tmp_path, account=ACCOUNT.replace("us-west-2", "mars-west-2"))
    [problem] = _problems(path)
    included = tmp_path / "accounts" / "acme-aws.yaml"
    assert problem.startswith(f"{included}:5:")
    assert "regions[1]" in problem and "mars-west-2" in problem


def test_missing_included_file_names_the_include_line(tmp_path: Path) -> None:
    path = _tree(tmp_path, policy=POLICY.replace("acme-aws.yaml", "nope.yaml"))
    [problem] = _problems(path)
    assert problem.startswith(f"{path}:3:5: accounts[0].file:")
    assert "'accounts/nope.yaml' does not exist" in problem


def test_include_with_other_keys_is_refused(tmp_path: Path) -> None:
    text = POLICY.replace("   # included\n", "\n    regions: [us-east-1]\n")
    [problem] = _problems(_tree(tmp_path, policy=text))
    assert "accounts[0].file" in problem and "also found: regions" in problem


def test_another_customers_account_is_refused(tmp_path: Path) -> None:
    path = _tree(tmp_path, account=ACCOUNT.replace("customer: acme", "customer: globex"))
    [problem] = _problems(path)
    assert "customer 'globex''s account, not 'acme''s" in problem


def test_includes_in_a_flow_list_are_refused(tmp_path: Path) -> None:
    text = "customer: acme\naccounts: [{file: accounts/acme-aws.yaml}]\n"
    [problem] = _problems(_tree(tmp_path, policy=text))
    assert problem.startswith(f"{tmp_path / 'policy.yaml'}:2:1: accounts:")


def test_text_without_includes_is_unchanged(tmp_path: Path) -> None:
    text = POLICY.replace("  - file: accounts/acme-aws.yaml   # included\n", "")
    assert "file" not in text
    assert expand_account_includes(text, "p.yaml", tmp_path) == text
    mentions = "# an include looks like: - file: accounts/x.yaml\n" + text  # not an include
    assert expand_account_includes(mentions, "p.yaml", tmp_path) == mentions
    broken = "customer: [unclosed\n  file: x"
    assert expand_account_includes(broken, "p.yaml", tmp_path) == broken


def test_the_example_policy_takes_its_aws_account_from_the_account_file() -> None:
    loaded = load_policy_file(ROOT / "examples" / "policy.yaml")
    spec = load_account_file(ROOT / "examples" / "accounts" / "aws-customer.yaml").spec
    assert loaded.policy.account("acme-aws") == spec.account()
    assert loaded.policy.customer == spec.customer


def test_example_policy_with_account_files_is_valid() -> None:
    path = ROOT / "examples" / "policy-with-account-files.yaml"
    loaded = load_policy_file(path)
    assert {a.name for a in loaded.policy.accounts} == {"acme-aws", "acme-gcp", "shared-aws"}
    assert read_policy_text(path) == loaded.raw


def test_policy_validate_cli_follows_includes(tmp_path: Path) -> None:
    ok = CliRunner().invoke(app, ["policy", "validate", str(_tree(tmp_path))])
    assert ok.exit_code == 0, ok.output
    bad = _tree(tmp_path, policy=POLICY.replace("acme-aws.yaml", "nope.yaml"))
    result = CliRunner().invoke(app, ["policy", "validate", str(bad)])
    assert result.exit_code == 1
    assert "accounts[0].file" in result.stderr
