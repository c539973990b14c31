"""The rule language of contracts.yaml: parse, type-check and evaluate rule expressions.

A rule is a small, safe subset of Python expressions over `value` (a field rule) or
`output` (a whole-output rule), e.g. ``0 <= value <= 100`` or ``len(output.findings) > 0``.
Nothing is ever handed to Python's eval/exec/compile: rules are parsed with Lark
(grammar/rules.lark) into a typed AST, checked statically against the deliverable's type,
and run by a tree-walking interpreter whose cost is bounded:

- at parse time (HC304, never run): text length, nesting depth, literal sizes, no ``**``,
  no names starting with ``_``, no ``literal * literal`` building a huge string or list,
  regex literals of bounded length that RE2 accepts (HC305; regexes never backtrack);
- at evaluation (RuleEvalError): sizes of built strings/lists, int magnitude, and a step
  budget charged by the size of the data each operation touches; an optional deadline
  (anything with a ``check()`` method) is checked as the steps add up.

Lark is imported only when the first rule is parsed, so importing this module stays cheap.
"""

from .interp import evaluate, evaluate_value
from .parse import parse_rule
from .tree import (
    FUNCTIONS,
    MAX_DEPTH,
    MAX_INT,
    MAX_INT_LITERAL,
    MAX_NDIGITS,
    MAX_PATTERN,
    MAX_RULE_CHARS,
    MAX_SIZE,
    MAX_STEPS,
    MAX_STR_LITERAL,
    NAMES,
    Attr,
    BinOp,
    BoolOp,
    Call,
    Compare,
    Const,
    Index,
    ListLit,
    Name,
    Node,
    Rule,
    RuleError,
    RuleEvalError,
    Unary,
)
from .typecheck import check_rule, type_of_deliverable

__all__ = [
    "parse_rule", "check_rule", "evaluate", "evaluate_value", "type_of_deliverable",
    "Rule", "RuleError", "RuleEvalError", "Node", "Const", "ListLit", "Name", "Attr", "Index",
    "Call", "Unary", "BinOp", "BoolOp", "Compare", "FUNCTIONS", "NAMES", "MAX_DEPTH", "MAX_INT",
    "MAX_INT_LITERAL", "MAX_NDIGITS", "MAX_PATTERN", "MAX_RULE_CHARS",
    "MAX_SIZE", "MAX_STEPS", "MAX_STR_LITERAL",
]
