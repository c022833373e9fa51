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
from ruamel.yaml.events import (
    AliasEvent,
    CollectionEndEvent,
    CollectionStartEvent,
    NodeEvent,
)

from schema.policy import SECRET_FIELDS, Policy, Problem, echo, semantic_problems

# Limits on what one YAML document may cost to read (issue 26: a 2 KB "billion laughs" of
# nested aliases took 36 s of CPU and 340 MB). gpucap's own bounds, far past any real file:
# the nodes (scalars and collections) the document has once every alias is expanded — a
# policy of MAX_MODELS (10,000) models is about 200,000 — and how deeply collections nest
# (a policy nests 6 levels deep).
MAX_YAML_NODES = 1_000_000
MAX_YAML_ALIASES = 1_000
MAX_YAML_DEPTH = 64


# How many problems one error carries: the first ones in document order, at most this many
# and about this many characters of them, then one line counting the rest. A gRPC error
# carries them three times (message, BadRequest, PolicyProblems) in its trailers, which
# gRPC refuses past 8 KB ("metadata size exceeds soft limit": 80 one-line problems did it),
# and a person fixes a file from its first problems anyway.
MAX_PROBLEMS = 20
MAX_PROBLEM_CHARS = 1500


class PolicyError(Exception):
    """A policy file that cannot be accepted; ``problems`` lists the reasons, in order
    (at most :data:`MAX_PROBLEMS`, the last one then counting those left out)."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = first_problems(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


def first_problems(problems: list[Problem]) -> list[Problem]:
    """``problems`` within :data:`MAX_PROBLEMS` and :data:`MAX_PROBLEM_CHARS` (one at
    least), plus a last problem saying how many more there are."""
    kept: list[Problem] = []
    used = 0
    for p in problems:
        size = len(str(p))
        if len(kept) == MAX_PROBLEMS or (kept and used + size > MAX_PROBLEM_CHARS):
            break
        kept.append(p)
        used += size
    rest = len(problems) - len(kept)
    if rest:
        reason = f"{rest} more problem{'s' if rest != 1 else ''} not shown: fix these first"
        kept.append(Problem((), reason, problems[0].file))
    return kept


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
    try:
        doc = load_yaml(text, source)
    except PolicyError:
        raise
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


def load_yaml(text: str, source: str) -> Any:
    """``text`` loaded round-trip (line numbers kept), after :func:`yaml_limit_problem`:
    raises :class:`PolicyError` for a document over the limits, ruamel's errors as they
    are for bad syntax."""
    too_much = yaml_limit_problem(text, source)
    if too_much is not None:
        raise PolicyError([too_much])
    return YAML(typ="rt").load(text)


def yaml_limit_problem(text: str, source: str) -> Problem | None:
    """Why ``text`` is too costly to load (aliases, nesting), or None. Reads the parser's
    events only, which costs time linear in the text: nothing is expanded or built. Text
    that does not parse is None here (the loader reports the syntax error)."""
    size: dict[str, int] = {}  # an anchor's expanded node count
    open_at: list[tuple[str | None, int]] = []  # per open collection: anchor, nodes before it
    nodes = aliases = 0
    try:
        for ev in YAML(typ="rt").parse(text):
            if not isinstance(ev, NodeEvent | CollectionEndEvent):
                continue
            line = ev.start_mark.line + 1 if ev.start_mark is not None else None
            if isinstance(ev, AliasEvent):
                aliases += 1
                nodes += size.get(str(ev.anchor), 1)
                if aliases > MAX_YAML_ALIASES:
                    reason = f"more than {MAX_YAML_ALIASES} aliases (*name)"
                    return Problem((), reason, source, line)
            elif isinstance(ev, CollectionStartEvent):
                nodes += 1
                open_at.append((ev.anchor, nodes - 1))
                if len(open_at) > MAX_YAML_DEPTH:
                    reason = f"nested more than {MAX_YAML_DEPTH} levels deep"
                    return Problem((), reason, source, line)
            elif isinstance(ev, CollectionEndEvent):
                anchor, before = open_at.pop() if open_at else (None, nodes)
                if anchor is not None:
                    size[str(anchor)] = nodes - before
            else:  # a scalar
                nodes += 1
                if ev.anchor is not None:
                    size[str(ev.anchor)] = 1
            if nodes > MAX_YAML_NODES:
                reason = (
                    f"more than {MAX_YAML_NODES:,} values once its aliases are expanded "
                    "(a YAML alias bomb?)"
                )
                return Problem((), reason, source, line)
    except Exception:  # bad syntax: the loader reports it, with its position
        return None
    return None


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
# The longest reason a problem keeps (a validator's message could quote a whole value).
MAX_REASON = 1000


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
        # (nor for a list: "at most 32 items" says it, its items would not)
        section = isinstance(err.get("input"), dict | list)
        if "input" in err and kind not in _NO_ECHO and not quoted and not section:
            reason += f" (got {echo(err.get('input'))})"
    # (pydantic's own messages name bounds, not values; a validator's may quote a value)
    if len(reason) > MAX_REASON:
        reason = reason[:MAX_REASON] + "..."
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
