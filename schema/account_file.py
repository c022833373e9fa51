"""An account file: one :class:`schema.policy.Account` in YAML, plus what ``gpucap account
check`` needs beyond it (``examples/accounts/*.yaml``).

Extra fields:
- ``customer``: whose account it is. Required for a customer-owned AWS account: the
  ExternalId is derived from it (``providers.credentials``), never written in the file.
- ``images``: region -> the base or baked image to check (AMI id, GCP image or family URL,
  OCI image OCID). Optional; without it the adapter's default base image is checked.

Problems carry file, line and field path, through the same loader as policy files.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from schema.policy import Account, Name, Policy, Problem, semantic_problems
from schema.policy_file import PolicyError, locate, parse_yaml_model
from schema.types import Cloud, Owner


class AccountFile(Account):
    customer: Name | None = None
    images: dict[str, str] = {}

    def account(self) -> Account:
        """The plain policy account (what a policy file would hold)."""
        return Account.model_validate(self.model_dump(exclude={"customer", "images"}))


@dataclass(frozen=True)
class LoadedAccount:
    spec: AccountFile
    source: str


def load_account_file(path: str | Path) -> LoadedAccount:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PolicyError([Problem((), f"cannot read file: {exc}", file=str(p))]) from exc
    return parse_account(text, source=str(p))


def parse_account(text: str, source: str = "<account>") -> LoadedAccount:
    """Parse and validate; raise :class:`PolicyError` listing every problem found."""
    spec, doc = parse_yaml_model(text, AccountFile, source, kind="Account")
    problems = [locate(doc, p, source) for p in account_problems(spec)]
    if problems:
        raise PolicyError(problems)
    return LoadedAccount(spec, source)


def account_problems(spec: AccountFile) -> list[Problem]:
    """The policy's per-account checks (regions, credentials, commitments, prices), with
    paths relative to the account file, plus the account-file fields."""
    policy = Policy(customer=spec.customer or "unnamed", accounts=[spec.account()])
    out = [
        Problem(p.path[2:], p.reason)
        for p in semantic_problems(policy)
        if p.path[:2] == ("accounts", 0)
    ]
    if spec.cloud == Cloud.AWS and spec.owner == Owner.CUSTOMER and spec.customer is None:
        reason = "a customer-owned aws account must name its customer (ExternalId source)"
        out.append(Problem(("customer",), reason))
    for region in spec.images:
        if region not in spec.regions:
            out.append(
                Problem(
                    ("images", region), f"region {region!r} is not one of this account's regions"
                )
            )
    return out
