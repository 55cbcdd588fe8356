"""Declaring the part of a contract an implementation does not support (``rlspec check --unsupported FILE``).

A library may implement only part of a contract (rlax's V-trace has no c̄ argument: it fixes c̄ = 1).
The cases it was never meant to handle are reported as "unsupported", not FAIL. The file follows
array-api-tests' xfails file: one rule per line, ``#`` starts a comment::

    VTRACE-5                      # the whole clause
    VTRACE-* if c_bar != 1        # every VTRACE clause, on the examples whose c_bar is not 1
    * if logits.dtype == float16  # every clause, on examples with float16 logits
    GAE-1 if gamma > 0.99 and lam < 1

A rule is a clause pattern (a clause id, or a shell-style pattern with ``*``) and, optionally, ``if``
and a condition on the example's case: comparisons ``NAME OP VALUE`` joined by ``and``, where NAME is a
key of the case (``rlspec list CONTRACT`` shows them per clause), optionally followed by ``.KEY`` into
a dict or ``.dtype``/``.shape``/``.ndim`` of a tensor; OP is one of == != < <= > >= in, not in, or ``is None``
/ ``is not None`` (an optional argument left at None, or given: ``VTRACE-2 if pg_rho_bar is not None``);
VALUE is a Python literal, ``inf``, ``nan`` or a dtype name (``float16``). A rule whose NAME a case does not
have does not apply to that case. Errors, reported before anything runs (a typo would hide nothing): a clause
pattern that matches no known clause, and a NAME that no case of the clauses the rule covers has.
"""

from __future__ import annotations

import ast
import dataclasses
import fnmatch
import math
import operator
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import torch

_OPS = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
        ast.Gt: operator.gt, ast.GtE: operator.ge, ast.In: lambda a, b: a in b,
        ast.NotIn: lambda a, b: a not in b, ast.Is: operator.is_, ast.IsNot: operator.is_not}
_NAMED = {"inf": math.inf, "nan": math.nan, "True": True, "False": False, "None": None}


class UnsupportedFileError(ValueError):
    """A rule that cannot be read or evaluated; the message names the file and line."""


@dataclasses.dataclass(frozen=True)
class Comparison:
    path: tuple[str, ...]  # case key, then dict keys / tensor attributes
    op: ast.cmpop
    value: Any


@dataclasses.dataclass
class Rule:
    where: str  # "FILE:LINE"
    text: str  # the rule as written
    pattern: str  # clause id or shell-style pattern
    conditions: tuple[Comparison, ...]  # empty: the whole clause
    examples: int = 0  # examples it matched so far
    clauses: dict[str, None] = dataclasses.field(default_factory=dict)  # clauses it matched so far, in order

    def covers(self, clause: str) -> bool:
        return fnmatch.fnmatchcase(clause, self.pattern)

    def names(self) -> set[str]:
        """The case keys the conditions read."""
        return {c.path[0] for c in self.conditions}

    def matches(self, case: Mapping[str, Any]) -> bool:
        return all(self._holds(c, case) for c in self.conditions)

    def _holds(self, cmp: Comparison, case: Mapping[str, Any]) -> bool:
        value: Any = case
        for i, part in enumerate(cmp.path):
            if isinstance(value, Mapping):
                if part not in value:
                    return False
                value = value[part]
            elif i and part in ("dtype", "shape", "ndim") and isinstance(value, torch.Tensor):
                value = getattr(value, part)
            else:
                return False
        if isinstance(value, torch.dtype):
            value = str(value).removeprefix("torch.")
        elif isinstance(value, torch.Size):
            value = tuple(value)
        elif isinstance(value, torch.Tensor):
            if value.numel() != 1:
                raise UnsupportedFileError(f"{self.where}: {'.'.join(cmp.path)} is a tensor of shape "
                                           f"{tuple(value.shape)}; a condition compares one value")
            value = value.item()
        try:
            return bool(_OPS[type(cmp.op)](value, cmp.value))
        except TypeError as err:
            raise UnsupportedFileError(f"{self.where}: cannot compare {'.'.join(cmp.path)} = {value!r} "
                                       f"with {cmp.value!r}: {err}") from None


class UnsupportedCases:
    """The rules of one file; implements spec.core.Unsupported and counts what each rule matched."""

    def __init__(self, rules: Iterable[Rule]):
        self.rules = list(rules)

    def clause(self, clause: str) -> str | None:
        for rule in self.rules:
            if not rule.conditions and rule.covers(clause):
                rule.clauses[clause] = None
                return f"{rule.text} ({rule.where})"
        return None

    def case(self, clause: str, case: Mapping[str, Any]) -> str | None:
        for rule in self.rules:
            if rule.conditions and rule.covers(clause) and rule.matches(case):
                rule.examples += 1
                rule.clauses[clause] = None
                return f"{rule.text} ({rule.where})"
        return None

    def add(self, summary: list[dict]) -> None:
        """Count what a copy of these rules matched elsewhere (its ``summary()``; a worker process's)."""
        for rule, counted in zip(self.rules, summary, strict=True):
            rule.examples += counted["examples"]
            rule.clauses.update(dict.fromkeys(counted["clauses"]))

    def summary(self) -> list[dict]:
        return [dict(rule=r.text, where=r.where, clauses=list(r.clauses), examples=r.examples)
                for r in self.rules]


def load(path: Path, known_clauses: Iterable[str]) -> UnsupportedCases:
    """Read ``path``; every clause pattern must match one of ``known_clauses``."""
    try:
        text = Path(path).read_text()
    except OSError as err:
        raise UnsupportedFileError(f"cannot read the unsupported file: {err}") from None
    except UnicodeDecodeError as err:
        raise UnsupportedFileError(f"{path} is not a text file of rules ({err.reason} at byte {err.start})") from None
    known = list(known_clauses)
    rules = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        rule = parse_rule(line, f"{path}:{number}")
        if not any(rule.covers(c) for c in known):
            raise UnsupportedFileError(f"{rule.where}: {rule.pattern!r} matches no clause of any contract")
        rules.append(rule)
    return UnsupportedCases(rules)


def parse_rule(line: str, where: str) -> Rule:
    pattern, _, condition = line.partition(" if ")
    pattern = pattern.strip()
    if not pattern or " " in pattern:
        raise UnsupportedFileError(f"{where}: expected 'CLAUSE' or 'CLAUSE if CONDITION', got {line!r}")
    if not condition:
        return Rule(where, line, pattern, ())
    try:
        tree = ast.parse(condition.strip(), mode="eval").body
    except SyntaxError as err:
        raise UnsupportedFileError(f"{where}: cannot parse the condition {condition.strip()!r}: {err.msg}") from None
    terms = tree.values if isinstance(tree, ast.BoolOp) and isinstance(tree.op, ast.And) else [tree]
    return Rule(where, line, pattern, tuple(_comparison(t, where) for t in terms))


def _comparison(node: ast.expr, where: str) -> Comparison:
    if not (isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _OPS):
        raise UnsupportedFileError(f"{where}: a condition is 'NAME OP VALUE' (joined by 'and'), got "
                                   f"{ast.unparse(node)!r}")
    value = _value(node.comparators[0], where)
    if isinstance(node.ops[0], (ast.Is, ast.IsNot)) and value is not None:
        raise UnsupportedFileError(f"{where}: 'is' and 'is not' compare with None only ('NAME is None', "
                                   f"'NAME is not None'), got {ast.unparse(node)!r}")
    return Comparison(_path(node.left, where), node.ops[0], value)


def check_names(rules: UnsupportedCases, clauses: Iterable[str], case_keys: Callable[[str], Iterable[str]]) -> None:
    """An UnsupportedFileError for a rule whose condition reads a name that no case of the ``clauses`` it covers
    has (``case_keys(clause)``: the keys a clause's cases carry); rules covering none of ``clauses`` are left to
    the run that checks their contract."""
    clauses = list(clauses)
    for rule in rules.rules:
        covered = [c for c in clauses if rule.covers(c)]
        if not rule.conditions or not covered:
            continue
        keys = {k for c in covered for k in case_keys(c)}
        unknown = sorted(rule.names() - keys)
        if unknown:
            raise UnsupportedFileError(f"{rule.where}: {rule.text!r} reads {', '.join(map(repr, unknown))}, which no "
                                       f"case of {', '.join(covered)} has; their case keys: "
                                       f"{', '.join(sorted(keys)) or 'none (fixed checks)'}")


def _path(node: ast.expr, where: str) -> tuple[str, ...]:
    if isinstance(node, ast.Name):
        return (node.id,)
    if isinstance(node, ast.Attribute):
        return _path(node.value, where) + (node.attr,)
    raise UnsupportedFileError(f"{where}: the left side of a comparison is a case key like c_bar or "
                               f"logits.dtype, got {ast.unparse(node)!r}")


def _value(node: ast.expr, where: str) -> Any:
    if isinstance(node, ast.Name):
        return _NAMED.get(node.id, node.id)  # inf, nan, True, ... or a dtype name compared as text
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Name) \
            and node.operand.id == "inf":
        return -math.inf
    if isinstance(node, (ast.Tuple, ast.List)):
        return tuple(_value(e, where) for e in node.elts)
    try:
        return ast.literal_eval(node)
    except ValueError:
        raise UnsupportedFileError(f"{where}: the right side of a comparison is a literal, inf, nan or a "
                                   f"dtype name, got {ast.unparse(node)!r}") from None
