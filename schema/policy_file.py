"""Parse a policy file and report every problem with file, line, field path and reason.

ruamel.yaml keeps the line and column of every mapping key and sequence item, so a pydantic
error location such as ``("models", 1, "max_replicas")`` maps back to the line a human edits.
"""

from __future__ import annotations

import hashlib
import warnings
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

from schema.policy import (
    API_VERSION,
    SECRET_FIELDS,
    Account,
    Model,
    Overflow,
    Policy,
    Problem,
    echo,
    semantic_problems,
)

# Every gpucap file names its format: ``apiVersion`` (the version of the format) and
# ``kind`` (which file it is), as Kubernetes objects do. A file without both is read as the
# current version, with a deprecation warning (files written before versions existed).
API_VERSIONS = (API_VERSION,)
HEADER_KEYS = ("apiVersion", "kind")

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


class PolicyRefused(PolicyError):
    """A well-formed policy whose apply is refused by what is active: it names a model the
    API owns, or it deletes or drains without ``allow_deletes`` (``controlplane.policy_diff``).
    The active policy stays; FAILED_PRECONDITION over gRPC."""


def located(text: str, source: str, problems: list[Problem]) -> list[Problem]:
    """``problems`` of a policy text with their file, line and column."""
    doc = load_document(text, source)
    return [locate(doc, p, source) for p in problems]


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
    warnings: tuple[str, ...] = ()  # (e.g. a file without apiVersion and kind)


def load_policy_file(path: str | Path) -> LoadedPolicy:
    # Account includes ("- file: accounts/x.yaml") are expanded as the file is read
    # (schema/policy_includes.py; imported here because it imports this module).
    from schema.policy_includes import read_policy_text

    p = Path(path)
    return parse_policy(read_policy_text(p), source=str(p))


def parse_policy(text: str, source: str = "<policy>") -> LoadedPolicy:
    """Parse and validate; raise :class:`PolicyError` listing every problem found: the
    structural ones and, for the parts that are well-formed, the cross-field ones too."""
    doc = load_document(text, source)
    policy, problems = validate_document(doc, Policy, source, kind="Policy")
    if policy is None:
        problems += [locate(doc, p, source) for p in _partial_semantic(_plain(doc), problems)]
        problems.sort(key=lambda p: (p.line or 0, p.column or 0))
        raise PolicyError(problems)
    problems = [locate(doc, p, source) for p in semantic_problems(policy)]
    if problems:
        raise PolicyError(problems)
    warning = unversioned_warning(doc, "Policy", source)
    sha = hashlib.sha256(text.encode()).hexdigest()
    return LoadedPolicy(policy, text, sha, source, (warning,) if warning else ())


M = TypeVar("M", bound=BaseModel)


def parse_yaml_model(
    text: str, model: type[M], source: str, *, kind: str | None = None
) -> tuple[M, CommentedMap]:
    """Parse YAML text into ``model``; every problem (syntax, type, unknown field, range,
    with ``kind`` a wrong ``apiVersion``/``kind``) becomes a :class:`Problem` with file,
    line and field path. Used for every gpucap YAML file (policies, the daemon config,
    account and fleet files) so they all report errors alike."""
    doc = load_document(text, source)
    value, problems = validate_document(doc, model, source, kind=kind)
    if value is None:
        raise PolicyError(problems)
    if kind and unversioned_warning(doc, kind, source):
        # Shown as "FILE:1: UnversionedFileWarning: ..." (a daemon logs it as a log line).
        warnings.warn_explicit(
            UnversionedFileWarning(_unversioned(kind)), UnversionedFileWarning, source, 1
        )
    return value, doc


class UnversionedFileWarning(FutureWarning):
    """A file without ``apiVersion`` and ``kind``: read as the current version, for now.
    (A FutureWarning: Python shows those to users by default.)"""


def validate_document(
    doc: CommentedMap, model: type[M], source: str, *, kind: str | None = None
) -> tuple[M | None, list[Problem]]:
    """``doc`` as ``model`` (None, and every problem found, when it is not one). With
    ``kind``, the document's ``apiVersion``/``kind`` are checked and left out."""
    problems = header_problems(doc, kind, source) if kind else []
    data = _plain(doc)
    if kind:
        for key in HEADER_KEYS:
            data.pop(key, None)
    try:
        value = model.model_validate(data)
    except ValidationError as exc:
        return None, problems + [locate(doc, _from_pydantic(e), source) for e in exc.errors()]
    return (None, problems) if problems else (value, [])


def header_problems(doc: CommentedMap, kind: str, source: str) -> list[Problem]:
    """What is wrong with the document's ``apiVersion`` and ``kind`` (nothing when both are
    absent: an unversioned file, see :func:`unversioned_warning`)."""
    version, got = doc.get("apiVersion"), doc.get("kind")
    if version is None and got is None:
        return []
    out: list[Problem] = []
    if version is None:
        out.append(Problem(("apiVersion",), f"required with kind (apiVersion: {API_VERSION})"))
    elif version not in API_VERSIONS:
        out.append(
            Problem(
                ("apiVersion",),
                f"unknown apiVersion {echo(version)} (known: {', '.join(API_VERSIONS)})",
            )
        )
    if got is None:
        out.append(Problem(("kind",), f"required with apiVersion (kind: {kind})"))
    elif got != kind:
        out.append(Problem(("kind",), f"expected kind {kind} for this file (got {echo(got)})"))
    return [locate(doc, p, source) for p in out]


def unversioned_warning(doc: CommentedMap, kind: str, source: str) -> str | None:
    """The deprecation warning for a file without ``apiVersion`` and ``kind``, or None."""
    if any(key in doc for key in HEADER_KEYS):
        return None
    return f"{source}: warning: {_unversioned(kind)}"


def _unversioned(kind: str) -> str:
    return (
        f"no apiVersion and kind; read as apiVersion {API_VERSION}, kind {kind} (deprecated: "
        f"add 'apiVersion: {API_VERSION}' and 'kind: {kind}' at the top)"
    )


def load_document(text: str, source: str) -> CommentedMap:
    """``text`` as a YAML mapping with line numbers; :class:`PolicyError` (file, line,
    reason) for bad syntax, a document over the limits, or anything but a mapping."""
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
    return doc


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


def _partial_semantic(data: Any, structural: list[Problem]) -> list[Problem]:
    """The cross-field checks of :func:`schema.policy.semantic_problems` over the parts of a
    policy that are well-formed, so one pass reports both kinds. A check that reads a part
    which is not well-formed is left out (it would report what the structural problem
    already explains): a model's clouds, regions and shared-capacity bound when an account
    or the overflow section is broken, the names listed in overflow and adopt_models when
    a model is."""
    if not isinstance(data, dict):
        return []
    broken = {p.path[0] for p in structural if p.path}

    def valid_items(key: str, model: type[BaseModel]) -> list[tuple[int, Any]]:
        items = data.get(key)
        if not isinstance(items, list):
            return []
        out = []
        for i, item in enumerate(items):
            try:
                out.append((i, model.model_validate(item)))
            except ValidationError:
                continue
        return out

    accounts, models = valid_items("accounts", Account), valid_items("models", Model)
    try:
        overflow = Overflow.model_validate(data.get("overflow", {}))
    except ValidationError:
        overflow = Overflow()
    adopt = data.get("adopt_models") if "adopt_models" not in broken else []
    policy = Policy.model_construct(
        customer="unchecked",
        accounts=[a for _, a in accounts],
        models=[m for _, m in models],
        overflow=overflow,
        allow_deletes=False,
        adopt_models=[str(a) for a in adopt] if isinstance(adopt, list) else [],
    )
    index = {"accounts": [i for i, _ in accounts], "models": [i for i, _ in models]}
    skip_model_fields = {"clouds", "regions", "min_replicas"}
    out: list[Problem] = []
    for p in semantic_problems(policy):
        section = p.path[0] if p.path else None
        if section in ("accounts", "models"):
            rest = p.path[2:]
            if (
                section == "models"
                and ({"accounts", "overflow"} & broken)
                and rest
                and rest[0] in skip_model_fields
            ):
                continue
            p = Problem((section, index[str(section)][int(p.path[1])], *rest), p.reason)
        elif (section == "overflow" and {"accounts", "models", "overflow"} & broken) or (
            section == "adopt_models" and "models" in broken
        ):
            continue
        out.append(p)
    return out


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
