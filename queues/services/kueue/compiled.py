"""A JSON Schema compiled once into Python checks, for validating many objects.

jsonschema interprets a schema anew for every object (72 % of a Kueue export of 10,000
projects). Each schema is compiled once into nested Python checks that answer only "valid or
not"; an object it cannot pass is validated again by jsonschema, which gives the messages.
The compiled check is never looser than jsonschema: a keyword it does not know makes it
answer "not valid" (jsonschema then decides), and where it is unsure (a float that may be an
integer, an enum of mixed types) it says "not valid" too. Same errors, same strictness.
"""

import gc
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

Check = Callable[[Any], bool]

# Keywords jsonschema's Draft 7 does not validate (annotations, Kubernetes' extensions that
# ``structural_to_jsonschema`` has already turned into JSON Schema).
_IGNORED = frozenset(
    {
        "title",
        "description",
        "default",
        "example",
        "examples",
        "nullable",
        "x-kubernetes-int-or-string",
        "x-kubernetes-list-type",
        "x-kubernetes-map-type",
        "x-kubernetes-preserve-unknown-fields",
        "x-kubernetes-embedded-resource",
        "x-kubernetes-validations",
    }
)
_TYPES: dict[str, Check] = {
    "object": lambda x: isinstance(x, dict),
    "array": lambda x: isinstance(x, list),
    "string": lambda x: isinstance(x, str),
    # Stricter than Draft 7 (which takes 1.0 as an integer): jsonschema decides those.
    "integer": lambda x: isinstance(x, int) and not isinstance(x, bool),
    "number": lambda x: isinstance(x, int | float) and not isinstance(x, bool),
    "boolean": lambda x: isinstance(x, bool),
    "null": lambda x: x is None,
}


def _never(instance: Any) -> bool:
    return False


def _all(checks: list[Check]) -> Check:
    if not checks:
        return lambda instance: True
    if len(checks) == 1:
        return checks[0]

    def check_all(instance: Any) -> bool:
        for check in checks:  # noqa: SIM110 (a loop: no generator per call, a hot path)
            if not check(instance):
                return False
        return True

    return check_all


def compile_check(schema: Any, cls: Any) -> Check:
    """Whether an instance is valid against ``schema`` under the jsonschema validator class
    ``cls`` (its keyword functions check the leaves), compiled once: never looser (see the
    module's docstring)."""
    if schema is True or schema == {}:
        return lambda instance: True
    if schema is False or not isinstance(schema, dict):
        return _never
    if set(schema) - _IGNORED - set(_KEYWORDS):
        return _never  # a keyword this compiler does not know: jsonschema decides
    fast = _fast_shape(schema, cls)
    if fast is not None:
        return fast
    checks = [
        check
        for keyword in _KEYWORDS
        if keyword in schema
        for check in [_KEYWORDS[keyword](schema[keyword], schema, cls)]
        if check is not None
    ]
    return _all(checks)


# The shapes most of a manifest is made of, each checked by one function instead of one per
# keyword (the same answers: these are the keyword checks below, inlined).
_OBJECT_KEYS = frozenset({"type", "properties", "required", "additionalProperties"})
_STRING_KEYS = frozenset({"type", "pattern", "maxLength", "minLength", "enum"})


def _fast_shape(schema: dict[str, Any], cls: Any) -> Check | None:
    keys = set(schema) - _IGNORED
    if schema.get("type") == "object" and keys <= _OBJECT_KEYS:
        return _object_shape(schema, cls)
    if schema.get("type") == "string" and keys <= _STRING_KEYS:
        return _string_shape(schema)
    if schema.get("type") == "array" and keys <= {"type", "items"}:
        items = schema.get("items", True)
        if isinstance(items, list):
            return None
        sub = compile_check(items, cls)

        def array(x: Any) -> bool:
            if not isinstance(x, list):
                return False
            for item in x:  # noqa: SIM110 (a loop: no generator per call, a hot path)
                if not sub(item):
                    return False
            return True

        return array
    return None


def _object_shape(schema: dict[str, Any], cls: Any) -> Check:
    """``type: object`` with ``properties``, ``required`` and ``additionalProperties``."""
    subs = {name: compile_check(sub, cls) for name, sub in schema.get("properties", {}).items()}
    required = tuple(schema.get("required", ()))
    extra = (
        compile_check(schema["additionalProperties"], cls)
        if "additionalProperties" in (schema)
        else None
    )
    get = subs.get

    def check(x: Any) -> bool:
        if not isinstance(x, dict):
            return False
        for name in required:
            if name not in x:
                return False
        for name, item in x.items():  # an object has few of its schema's many properties
            sub = get(name)
            if sub is None:
                if extra is not None and not extra(item):
                    return False
            elif not sub(item):
                return False
        return True

    return check


def _string_shape(schema: dict[str, Any]) -> Check | None:
    """``type: string`` with ``pattern``, ``maxLength``, ``minLength`` and ``enum``."""
    if "enum" in schema and not (
        isinstance(schema["enum"], list) and all(isinstance(v, str) for v in schema["enum"])
    ):
        return None
    bounds = [schema.get("minLength", 0), schema.get("maxLength", 0)]
    if any(not isinstance(b, int) or isinstance(b, bool) for b in bounds):
        return None
    pattern = re.compile(schema["pattern"]).search if "pattern" in schema else None
    shortest = schema.get("minLength")
    longest = schema.get("maxLength")
    allowed = frozenset(schema["enum"]) if "enum" in schema else None

    def check(x: Any) -> bool:
        if not isinstance(x, str):
            return False
        if allowed is not None and x not in allowed:
            return False
        if (shortest is not None and len(x) < shortest) or (
            longest is not None and len(x) > longest
        ):
            return False
        return pattern is None or pattern(x) is not None

    return check


def _type(value: Any, schema: dict[str, Any], cls: Any) -> Check:
    names = value if isinstance(value, list) else [value]
    if any(name not in _TYPES for name in names):
        return _never
    tests = [_TYPES[name] for name in names]
    if len(tests) == 1:
        return tests[0]
    return lambda x: any(test(x) for test in tests)


def _enum(value: Any, schema: dict[str, Any], cls: Any) -> Check:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return _never
    allowed = frozenset(value)
    return lambda x: isinstance(x, str) and x in allowed


def _const(value: Any, schema: dict[str, Any], cls: Any) -> Check:
    if not isinstance(value, str):
        return _never
    return lambda x: isinstance(x, str) and x == value


def _properties(value: Any, schema: dict[str, Any], cls: Any) -> Check:
    subs = {name: compile_check(sub, cls) for name, sub in value.items()}

    def check(x: Any) -> bool:
        if not isinstance(x, dict):
            return True
        for name, item in x.items():  # an object has few of its schema's many properties
            sub = subs.get(name)
            if sub is not None and not sub(item):
                return False
        return True

    return check


def _additional(value: Any, schema: dict[str, Any], cls: Any) -> Check:
    known = frozenset(schema.get("properties", {}))
    patterns = [re.compile(p) for p in schema.get("patternProperties", {})]
    sub = compile_check(value, cls)

    def check(x: Any) -> bool:
        if not isinstance(x, dict):
            return True
        for name, item in x.items():
            if name in known or any(p.search(name) for p in patterns):
                continue
            if not sub(item):
                return False
        return True

    return check


def _pattern_properties(value: Any, schema: dict[str, Any], cls: Any) -> Check:
    subs = [(re.compile(p), compile_check(sub, cls)) for p, sub in value.items()]

    def check(x: Any) -> bool:
        if not isinstance(x, dict):
            return True
        return all(sub(item) for name, item in x.items() for p, sub in subs if p.search(name))

    return check


def _required(value: Any, schema: dict[str, Any], cls: Any) -> Check:
    names = list(value)
    return lambda x: not isinstance(x, dict) or all(name in x for name in names)


def _items(value: Any, schema: dict[str, Any], cls: Any) -> Check:
    if isinstance(value, list):
        return _never  # tuple validation: jsonschema decides
    sub = compile_check(value, cls)
    return lambda x: not isinstance(x, list) or all(sub(item) for item in x)


def _bound(test: Callable[[Any, Any], bool], kinds: tuple[type, ...]) -> Callable[..., Check]:
    def make(value: Any, schema: dict[str, Any], cls: Any) -> Check:
        if not isinstance(value, int | float) or isinstance(value, bool):
            return _never

        def check(x: Any) -> bool:
            return not isinstance(x, kinds) or isinstance(x, bool) or test(x, value)

        return check

    return make


def _pattern(value: Any, schema: dict[str, Any], cls: Any) -> Check:
    compiled = re.compile(value)
    return lambda x: not isinstance(x, str) or compiled.search(x) is not None


def _combinator(kind: str) -> Callable[..., Check]:
    def make(value: Any, schema: dict[str, Any], cls: Any) -> Check:
        if kind == "not":
            # "valid when the sub-schema fails" cannot be answered by a check that says "not
            # valid" when unsure: jsonschema decides.
            return _never
        subs = [compile_check(item, cls) for item in value]
        if kind == "allOf":
            return _all(subs)
        if kind == "anyOf":
            return lambda x: any(sub(x) for sub in subs)
        # oneOf: a check that says "not valid" when unsure may miss a second match.
        return _never

    return make


def _leaf(keyword: str) -> Callable[..., Check]:
    """A keyword checked by jsonschema's (or our) own function on this value alone: no
    descent, so no interpretive cost worth compiling away."""

    def make(value: Any, schema: dict[str, Any], cls: Any) -> Check:
        function = cls.VALIDATORS[keyword]
        probe = cls(schema)

        def check(x: Any) -> bool:
            return next(iter(function(probe, value, x, schema) or ()), None) is None

        return check

    return make


def _length(
    test: Callable[[int, int], bool], kind: type[str] | type[list] | type[dict]
) -> Callable[..., Check]:
    def make(value: Any, schema: dict[str, Any], cls: Any) -> Check:
        if not isinstance(value, int) or isinstance(value, bool):
            return _never
        return lambda x: not isinstance(x, kind) or test(len(x), value)

    return make


_KEYWORDS: dict[str, Callable[[Any, dict[str, Any], Any], Check]] = {
    "type": _type,
    "enum": _enum,
    "const": _const,
    "required": _required,
    "properties": _properties,
    "patternProperties": _pattern_properties,
    "additionalProperties": _additional,
    "items": _items,
    "minimum": _bound(lambda x, v: x >= v, (int, float)),
    "maximum": _bound(lambda x, v: x <= v, (int, float)),
    "exclusiveMinimum": _bound(lambda x, v: x > v, (int, float)),
    "exclusiveMaximum": _bound(lambda x, v: x < v, (int, float)),
    "minLength": _length(lambda n, v: n >= v, str),
    "maxLength": _length(lambda n, v: n <= v, str),
    "minItems": _length(lambda n, v: n >= v, list),
    "maxItems": _length(lambda n, v: n <= v, list),
    "minProperties": _length(lambda n, v: n >= v, dict),
    "maxProperties": _length(lambda n, v: n <= v, dict),
    "pattern": _pattern,
    "allOf": _combinator("allOf"),
    "anyOf": _combinator("anyOf"),
    "oneOf": _combinator("oneOf"),
    "not": _combinator("not"),
    "uniqueItems": _leaf("uniqueItems"),
    "multipleOf": _leaf("multipleOf"),
    "format": _leaf("format"),
    "x-kubernetes-list-map-keys": _leaf("x-kubernetes-list-map-keys"),
}


@contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic garbage collection while a sync builds and checks its objects: they are
    trees of dicts, lists and strings (no cycles to collect), and at 10,000 projects
    (100,000 objects, millions of containers) the collector's passes over them took more
    time than the building and the checking together. Collection resumes after, as it was."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
