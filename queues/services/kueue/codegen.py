"""A JSON Schema's compiled check generated as Python source, for the hottest shapes.

``compiled.compile_check`` builds a tree of closures: one call per schema node and per
keyword, for every object. At 10,000 projects (100,000 objects) those calls were most of the
validation. Here the same checks are written out as the source of one Python function per
object schema (``type: object`` with ``properties``, ``required`` and
``additionalProperties``): its strings, enums, plain types and arrays are tested inline, in
the loop over the object's own keys, and each nested object schema is a call to its own
generated function. Every other schema (and keyword) is checked by ``compile_check``'s own
closure, called from the generated code. The answers are ``compile_check``'s: never looser
than jsonschema (an object it does not pass is validated again by jsonschema for the
messages), as the tests compare on every broken object of the suite.
"""

import re
from typing import Any

from .compiled import _IGNORED, _KEYWORDS, _OBJECT_KEYS, _STRING_KEYS, Check, compile_check

# Plain types tested inline (the same tests as ``compiled._TYPES``).
_TYPE_TESTS = {
    "object": "isinstance({v}, dict)",
    "array": "isinstance({v}, list)",
    "string": "isinstance({v}, str)",
    "integer": "(isinstance({v}, int) and not isinstance({v}, bool))",
    "number": "(isinstance({v}, (int, float)) and not isinstance({v}, bool))",
    "boolean": "isinstance({v}, bool)",
    "null": "{v} is None",
}


class _Generator:
    def __init__(self, cls: Any) -> None:
        self.cls = cls
        self.constants: dict[str, Any] = {}
        self.functions: list[str] = []
        self.names = 0

    def constant(self, value: Any) -> str:
        self.names += 1
        name = f"_c{self.names}"
        self.constants[name] = value
        return name

    def function(self, schema: dict[str, Any]) -> str:
        """The name of a generated function checking an object schema."""
        self.names += 1
        name = f"_f{self.names}"
        body = [f"def {name}(x):", "    if not isinstance(x, dict):", "        return False"]
        required = list(schema.get("required", ()))
        if required:
            test = " or ".join(f"{field!r} not in x" for field in required)
            body += [f"    if {test}:", "        return False"]
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        extra_lines = self.block(extra, "v", depth=0) if extra is not None else []
        if not properties and not extra_lines:
            self.functions.append("\n".join([*body, "    return True"]))  # any keys
            return name
        body.append("    for k, v in x.items():")
        branch = "if"
        for prop, sub in properties.items():
            lines = self.block(sub, "v", depth=0)
            body.append(f"        {branch} k == {prop!r}:")
            body += ["            " + line for line in lines or ["pass"]]
            branch = "elif"
        if branch == "if":
            body += ["        " + line for line in extra_lines or ["pass"]]
        else:
            body.append("        else:")
            body += ["            " + line for line in extra_lines or ["pass"]]
        body.append("    return True")
        self.functions.append("\n".join(body))
        return name

    def block(self, schema: Any, v: str, depth: int) -> list[str]:
        """Statements that ``return False`` when ``v`` does not pass ``schema``."""
        if schema is True or schema == {}:
            return []
        if schema is False or not isinstance(schema, dict):
            return ["return False"]
        keys = set(schema) - _IGNORED
        if keys - set(_KEYWORDS):
            return ["return False"]  # as compile_check: jsonschema decides
        kind = schema.get("type")
        if kind == "object" and keys <= _OBJECT_KEYS:
            return [f"if not {self.function(schema)}({v}):", "    return False"]
        if kind == "string" and keys <= _STRING_KEYS:
            lines = self.string(schema, v)
            if lines is not None:
                return lines
        if kind == "array" and keys <= {"type", "items"} and depth < 4:
            items = schema.get("items", True)
            if not isinstance(items, list):
                item = f"i{depth}"
                inner = self.block(items, item, depth + 1)
                lines = [f"if not isinstance({v}, list):", "    return False"]
                if inner:
                    lines += [f"for {item} in {v}:"] + ["    " + line for line in inner]
                return lines
        return self.keywords(schema, v, depth)

    def keywords(self, schema: dict[str, Any], v: str, depth: int) -> list[str]:
        """Each keyword of ``schema`` as ``compile_check`` checks it (``_KEYWORDS``): the
        simple ones inline, the others by its closure."""
        lines: list[str] = []
        # "type" is checked first: past a check of one of these, the value is of that type and
        # the other keywords need not test it again.
        known = _KNOWN.get(schema["type"]) if isinstance(schema.get("type"), str) else None
        for keyword in _KEYWORDS:
            if keyword in schema:
                lines += self.keyword(keyword, schema[keyword], schema, v, depth, known)
        return lines

    def keyword(
        self,
        keyword: str,
        value: Any,
        schema: dict[str, Any],
        v: str,
        depth: int,
        known: str | None = None,
    ) -> list[str]:
        """Statements checking one keyword of ``schema`` on ``v``; ``known``: the Python type
        ``v`` is known to be of (``list``, ``str``, ``dict``), whose tests are left out."""
        fail = "    return False"
        is_int = isinstance(value, int) and not isinstance(value, bool)
        if keyword == "type":
            names = value if isinstance(value, list) else [value]
            if not names or any(name not in _TYPE_TESTS for name in names):
                return ["return False"]
            test = " or ".join(_TYPE_TESTS[name].format(v=v) for name in names)
            return [f"if not ({test}):", fail]
        if keyword == "enum" and isinstance(value, list) and value:
            if not all(isinstance(item, str) for item in value):
                return ["return False"]
            allowed = self.constant(frozenset(value))
            return [f"if not isinstance({v}, str) or {v} not in {allowed}:", fail]
        if keyword == "required" and isinstance(value, list) and value:
            test = " or ".join(f"{name!r} not in {v}" for name in value)
            return [f"if {_is(v, 'dict', known)}({test}):", fail]
        if keyword == "items" and isinstance(value, dict) and depth < 4:
            item = f"i{depth}"
            inner = self.block(value, item, depth + 1)
            if not inner:
                return []
            loop = [f"for {item} in {v}:"] + ["    " + line for line in inner]
            if known == "list":
                return loop
            return [f"if isinstance({v}, list):"] + ["    " + line for line in loop]
        sizes = {"minItems": ("list", "<"), "maxItems": ("list", ">")}
        sizes |= {"minLength": ("str", "<"), "maxLength": ("str", ">")}
        if keyword in sizes and is_int:
            kind, wrong = sizes[keyword]
            return [f"if {_is(v, kind, known)}len({v}) {wrong} {value}:", fail]
        if keyword == "pattern" and isinstance(value, str):
            return self.pattern(value, v, _is(v, "str", known))
        if keyword == "anyOf" and isinstance(value, list) and value:
            tests = " or ".join(self.predicate(sub, v) for sub in value)
            return [f"if not ({tests}):", fail]
        function = self.cls.VALIDATORS.get(keyword)
        keys = value if isinstance(value, list) else []
        if getattr(function, "unique_by_keys", False) and keys and depth < 4:
            # Fails when two of the list's objects have the same str() of each key.
            seen, item = f"s{depth}", f"u{depth}"
            key = ", ".join(f"str({item}.get({name!r}))" for name in keys)
            unique = [
                f"{seen} = set()",
                f"for {item} in {v}:",
                f"    if isinstance({item}, dict):",
                f"        if ({key},) in {seen}:",
                "            return False",
                f"        {seen}.add(({key},))",
            ]
            if known == "list":
                return unique
            return [f"if isinstance({v}, list):"] + ["    " + line for line in unique]
        check = self.constant(_KEYWORDS[keyword](value, schema, self.cls))
        return [f"if not {check}({v}):", fail]

    def predicate(self, schema: Any, v: str) -> str:
        """An expression true when ``v`` passes ``schema``."""
        if isinstance(schema, dict) and set(schema) == {"type"}:
            kind = schema["type"]
            if isinstance(kind, str) and kind in _TYPE_TESTS:
                return _TYPE_TESTS[kind].format(v=v)
        self.names += 1
        name = f"_g{self.names}"
        lines = self.block(schema, "x", depth=0)
        body = [f"def {name}(x):"] + ["    " + line for line in lines] + ["    return True"]
        self.functions.append("\n".join(body))
        return f"{name}({v})"

    def string(self, schema: dict[str, Any], v: str) -> list[str] | None:
        """``compiled._string_shape`` written out (None where it declines)."""
        if "enum" in schema and not (
            isinstance(schema["enum"], list) and all(isinstance(e, str) for e in schema["enum"])
        ):
            return None
        for bound in ("minLength", "maxLength"):
            value = schema.get(bound, 0)
            if not isinstance(value, int) or isinstance(value, bool):
                return None
        lines = [f"if not isinstance({v}, str):", "    return False"]
        if "enum" in schema:
            allowed = self.constant(frozenset(schema["enum"]))
            lines += [f"if {v} not in {allowed}:", "    return False"]
        if "minLength" in schema:
            lines += [f"if len({v}) < {schema['minLength']}:", "    return False"]
        if "maxLength" in schema:
            lines += [f"if len({v}) > {schema['maxLength']}:", "    return False"]
        if "pattern" in schema:
            lines += self.pattern(schema["pattern"], v)
        return lines

    def pattern(self, pattern: str, v: str, guard: str = "") -> list[str]:
        """Statements failing when the string ``v`` does not match ``pattern`` (``guard``:
        the test that ``v`` is a string). The strings found to match are remembered (up to
        ``_MATCHED``): a sync's objects repeat a few (quantities, flavor and cohort names)."""
        search = self.constant(re.compile(pattern).search)
        matched = self.constant(set())
        return [
            f"if {guard}{v} not in {matched}:",
            f"    if {search}({v}) is None:",
            "        return False",
            f"    if len({matched}) < {_MATCHED}:",
            f"        {matched}.add({v})",
        ]


# The most strings remembered per pattern as matching it.
_MATCHED = 4096

# The JSON types whose check leaves the value of one Python type (``_TYPE_TESTS``).
_KNOWN = {"array": "list", "string": "str", "object": "dict"}


def _is(v: str, kind: str, known: str | None) -> str:
    """``isinstance(v, kind) and `` where ``v`` may be of another type, else nothing."""
    return "" if known == kind else f"isinstance({v}, {kind}) and "


def generate_check(schema: Any, cls: Any) -> Check:
    """``compile_check(schema, cls)``, as generated Python where the schema is an object of
    the common shape (see the module's docstring)."""
    if not (
        isinstance(schema, dict)
        and schema.get("type") == "object"
        and set(schema) - _IGNORED <= _OBJECT_KEYS
    ):
        return compile_check(schema, cls)
    generator = _Generator(cls)
    entry = generator.function(schema)
    namespace: dict[str, Any] = dict(generator.constants)
    exec(compile("\n\n".join(generator.functions), "<kueue schema>", "exec"), namespace)
    check: Check = namespace[entry]
    return check
