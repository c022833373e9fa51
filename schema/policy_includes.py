"""Account includes in policy files: ``accounts: [- file: accounts/aws-customer.yaml]``.

An include names an account file (``schema/account_file.py``), relative to the policy file.
Includes are expanded *when the file is read*, into a self-contained policy text:

- the stored policy version (``policy_versions.raw_yaml``) and its sha256 cover the included
  account, so editing an account file makes a new version, and a stored version never
  depends on files that may have moved since;
- each include is replaced *on its own line* by the account as a one-line YAML flow mapping, so
  every other line keeps its number and problems found later still point at the right
  line of the policy file;
- a problem inside an included file names that file and its line; a problem with the
  include itself (missing file, extra keys, another customer's account) names the
  policy file and the include's line.

The account-file-only fields (``customer``, ``images``) are checked and dropped.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq

from schema.account_file import load_account_file
from schema.policy import Problem
from schema.policy_file import PolicyError, load_yaml

INCLUDE_KEY = "file"


def read_policy_text(path: str | Path) -> str:
    """A policy file's text with its account includes expanded (relative to the file)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PolicyError([Problem((), f"cannot read file: {exc}", file=str(p))]) from exc
    return expand_account_includes(text, str(p), p.parent)


def expand_account_includes(text: str, source: str, base_dir: Path) -> str:
    """``text`` with every ``- file: X`` account entry replaced by the account in X.

    Text that is not YAML, or has no includes, comes back unchanged (the policy parser
    reports its problems as usual). Raises :class:`PolicyError` for bad includes."""
    if f"{INCLUDE_KEY}:" not in text and f"{INCLUDE_KEY} :" not in text:
        return text
    try:
        doc = load_yaml(text, source)  # (within the alias and nesting limits)
    except Exception:  # the policy parser reports these problems with their position
        return text
    accounts = doc.get("accounts") if isinstance(doc, CommentedMap) else None
    if not isinstance(accounts, CommentedSeq):
        return text
    customer = doc.get("customer")
    lines = text.splitlines(keepends=True)
    problems: list[Problem] = []
    if accounts.fa.flow_style() and any(
        isinstance(a, CommentedMap) and INCLUDE_KEY in a for a in accounts
    ):
        line, col = doc.lc.key("accounts")
        reason = "write account includes as a block list ('- file: PATH', one per line)"
        raise PolicyError([Problem(("accounts",), reason, source, line + 1, col + 1)])
    for i, item in enumerate(accounts):
        if not (isinstance(item, CommentedMap) and INCLUDE_KEY in item):
            continue
        line, col = accounts.lc.item(i)
        where: dict[str, Any] = {"file": source, "line": line + 1, "column": col + 1}
        path_field = ("accounts", i, INCLUDE_KEY)
        extra = sorted(str(k) for k in item if k != INCLUDE_KEY)
        rel = item[INCLUDE_KEY]
        if extra:
            problems.append(
                Problem(
                    path_field,
                    f"an account include has only '{INCLUDE_KEY}:' (also found: "
                    f"{', '.join(extra)}); put account fields in the included file",
                    **where,
                )
            )
            continue
        if not isinstance(rel, str) or not rel.strip():
            problems.append(Problem(path_field, "expected the path of an account file", **where))
            continue
        included = (base_dir / rel).resolve()
        if not included.is_file():
            problems.append(
                Problem(path_field, f"included account file {rel!r} does not exist", **where)
            )
            continue
        try:
            spec = load_account_file(included).spec
        except PolicyError as exc:
            problems.extend(exc.problems)  # they name the included file and its lines
            continue
        if spec.customer is not None and customer is not None and spec.customer != customer:
            problems.append(
                Problem(
                    path_field,
                    f"{rel!r} is customer {spec.customer!r}'s account, not {customer!r}'s",
                    **where,
                )
            )
            continue
        account = spec.account().model_dump(mode="json", exclude_defaults=True)
        ending = "\n" if lines[line].endswith("\n") else ""
        flow = _one_line_flow(account)
        lines[line] = f"{lines[line][:col]}{flow}  # from {rel}{ending}"
    if problems:
        raise PolicyError(problems)
    return "".join(lines)


def _one_line_flow(data: dict[str, Any]) -> str:
    """``data`` as a one-line YAML flow mapping (``{name: a, regions: [x, y]}``): the same
    plain style a person writes, so the expanded text reads like the original."""
    yaml = YAML(typ="rt")
    yaml.default_flow_style = True
    yaml.width = 1_000_000  # never wrap: the include must stay on its line
    buf = io.StringIO()
    yaml.dump(data, buf)
    text = buf.getvalue().strip()
    if "\n" in text:  # cannot happen for an Account's scalar fields; guard the line count
        raise ValueError("an included account did not render on one line")
    return text
