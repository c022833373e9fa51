"""Parse a policy file and report every problem with file, line, field path and reason.

ruamel.yaml keeps the line and column of every mapping key and sequence item, so a pydantic
error location such as ``("models", 1, "max_replicas")`` maps back to the line a human edits.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import MarkedYAMLError

from schema.policy import SECRET_FIELDS, Policy, Problem, semantic_problems


class PolicyError(Exception):
    """A policy file that cannot be accepted; ``problems`` lists every reason, in order."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


@dataclass(frozen=True)
class LoadedPolicy:
    policy: Policy
    raw: str
    sha256: str
    source: str


def load_policy_file(path: str | Path) -> LoadedPolicy:
    # Account includes ("- file: accounts/x.yaml") are expanded as the file is read
    # (schema/policy_includes.py; imported here because it imports this module).
    from schema.policy_includes import read_policy_text

    p = Path(path)
    return parse_policy(read_policy_text(p), source=str(p))


def parse_policy(text: str, source: str = "<policy>") -> LoadedPolicy:
    """Parse and validate; raise :class:`PolicyError` listing every problem found."""
    policy, doc = parse_yaml_model(text, Policy, source)
    problems = [locate(doc, p, source) for p in semantic_problems(policy)]
    if problems:
        raise PolicyError(problems)
    return LoadedPolicy(policy, text, hashlib.sha256(text.encode()).hexdigest(), source)


M = TypeVar("M", bound=BaseModel)


def parse_yaml_model(text: str, model: type[M], source: str) -> tuple[M, CommentedMap]:
    """Parse YAML text into ``model``; every problem (syntax, type, unknown field, range)
    becomes a :class:`Problem` with file, line and field path. Used for every gpucap YAML
    file (policies, the daemon config, account files) so they all report errors alike."""
    yaml = YAML(typ="rt")
    try:
        doc = yaml.load(text)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        col = mark.column + 1 if mark is not None else None
        reason = f"YAML syntax error: {exc.problem or exc.context}"
        start = exc.context_mark
        # e.g. an unclosed '[' is only noticed lines later: also say where it was opened.
        if exc.problem and exc.context and start and mark and start.line != mark.line:
            reason += f" ({exc.context} started at line {start.line + 1})"
        raise PolicyError([Problem((), reason, file=source, line=line, column=col)]) from exc
    except Exception as exc:  # ruamel raises a few unmarked errors (e.g. duplicate anchors)
        raise PolicyError([Problem((), f"YAML error: {exc}", file=source)]) from exc
    if not isinstance(doc, CommentedMap):
        if doc is None:
            kind = "an empty document"
        elif isinstance(doc, CommentedSeq):
            kind = "a list"
        else:  # a lone scalar; say which YAML type it parsed as, not ruamel's class name
            kind = f"a single value ({type(doc).__name__})"
        raise PolicyError([Problem((), f"expected a mapping at top level, got {kind}", source, 1)])
    try:
        return model.model_validate(_plain(doc)), doc
    except ValidationError as exc:
        raise PolicyError([locate(doc, _from_pydantic(e), source) for e in exc.errors()]) from exc


def _plain(node: Any) -> Any:
    if isinstance(node, CommentedMap):
        return {str(k): _plain(v) for k, v in node.items()}
    if isinstance(node, CommentedSeq):
        return [_plain(v) for v in node]
    return node


def problems_from_validation_error(exc: ValidationError) -> list[Problem]:
    """Pydantic's errors as :class:`Problem` s (field path + reason, no line numbers), for
    callers that validate a policy fragment that did not come from a file (the gRPC API)."""
    return [_from_pydantic(e) for e in exc.errors()]


# Errors whose input is not echoed: a whole section (a model validator's) is noise, and a
# value that holds a secret must not be repeated in an error message or a log.
_NO_ECHO = ("model_type", "dict_type", "list_type", "secret_in_value")


def _from_pydantic(err: Any) -> Problem:
    loc = tuple(err["loc"])
    # Drop pydantic's union/discriminator tags ("function-after[...]" etc.) from the path.
    path = tuple(p for p in loc if isinstance(p, int) or "[" not in str(p))
    kind = err["type"]
    if kind == "extra_forbidden":
        name = str(path[-1]) if path else ""
        reason = (
            "secrets are not accepted in a policy: store a reference (role_arn, "
            "service_account, OCI profile) instead"
            if name in SECRET_FIELDS
            else "unknown field"
        )
    elif kind == "missing":
        reason = "required field is missing"
    else:
        msg = str(err["msg"])
        reason = msg[len("Value error, ") :] if msg.startswith("Value error, ") else msg
        shown = repr(err.get("input"))
        # Skip the echo when the validator's message already quotes the value (a number in
        # the message is the bound, not the value: "greater than 1" for an input of 1).
        quoted = isinstance(err.get("input"), str) and shown in reason
        section = isinstance(err.get("input"), dict)
        if "input" in err and kind not in _NO_ECHO and not quoted and not section:
            reason += f" (got {shown})"
    return Problem(path, reason)


def locate(doc: CommentedMap, problem: Problem, source: str) -> Problem:
    """Attach the line/column of the deepest node on ``problem.path`` that exists."""
    line, col = 1, 1
    node: Any = doc
    for part in problem.path:
        try:
            if isinstance(node, CommentedMap) and part in node:
                line, col = node.lc.key(part)[0] + 1, node.lc.key(part)[1] + 1
                node = node[part]
            elif isinstance(node, CommentedSeq) and isinstance(part, int) and part < len(node):
                line, col = node.lc.item(part)[0] + 1, node.lc.item(part)[1] + 1
                node = node[part]
            else:
                break
        except (KeyError, IndexError, TypeError):
            break
    return Problem(problem.path, problem.reason, source, line, col)
