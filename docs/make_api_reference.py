"""Write docs/reference.md: every public name of openrouter_probe with its signature and docstring.

Run ``python docs/make_api_reference.py`` after changing a public signature or docstring;
``tests/project/test_docs.py`` fails when the committed page differs from what this script produces. The
page walks ``openrouter_probe.__all__`` in the groups of the package root's one table (its
``TYPE_CHECKING`` block: probe, rules, analyze, compile, generate, verify, errors), then the
``__all__`` of the public subpackages (``fake``, ``generation``). Each class shows the public methods
and properties it defines itself (inherited ones, such as pydantic's ``model_dump``, are left out);
a pydantic model shows its fields. The output is deterministic: annotations are printed as written
in the source (every module uses ``from __future__ import annotations``), defaults that are
functions by their qualified name, and nothing depends on the terminal or on memory addresses.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import inspect
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

PACKAGE = "openrouter_probe"
SUBPACKAGES = ("fake", "generation")
OUTPUT = Path(__file__).resolve().parent / "reference.md"
WIDTH = 96

_INTRO = """\
# Library API reference

Generated from the docstrings by `python docs/make_api_reference.py`; do not edit by hand
(`tests/project/test_docs.py` fails when this page is out of date). Everything here is importable from
`openrouter_probe` (`import openrouter_probe as orp; orp.probe(...)`), except the names of the
`openrouter_probe.fake` section, which live in that subpackage (`orp.fake.serve(...)`). Signatures
are printed as written in the source; a class lists the public methods and properties it defines
itself. `docs/index.md` maps each concept to its page and module.
"""

_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def _annotation(annotation: Any) -> str:
    """The annotation as written in the source (strings under postponed evaluation)."""
    if annotation is inspect.Parameter.empty:
        return ""
    if isinstance(annotation, str):
        return annotation
    if isinstance(annotation, type):
        return (
            annotation.__name__ if annotation.__module__ == "builtins" else annotation.__qualname__
        )
    return _ADDRESS.sub("", inspect.formatannotation(annotation))


def _default(value: Any) -> str:
    """A default value without memory addresses: functions and classes by qualified name."""
    if inspect.isfunction(value) or inspect.isbuiltin(value) or inspect.isclass(value):
        if value.__module__ == "builtins":
            return value.__qualname__
        return f"{value.__module__}.{value.__qualname__}"
    text = repr(value)
    if _ADDRESS.search(text):
        return f"<{type(value).__name__}>"
    return text


def _param(param: inspect.Parameter) -> str:
    text = param.name
    if param.kind is inspect.Parameter.VAR_POSITIONAL:
        text = "*" + text
    elif param.kind is inspect.Parameter.VAR_KEYWORD:
        text = "**" + text
    note = _annotation(param.annotation)
    if note:
        text += f": {note}"
    if param.default is not inspect.Parameter.empty:
        text += f" = {_default(param.default)}" if note else f"={_default(param.default)}"
    return text


def _params(sig: inspect.Signature) -> list[str]:
    """The parameters with ``/`` and ``*`` markers where the signature has them."""
    out: list[str] = []
    kinds = [p.kind for p in sig.parameters.values()]
    star_done = inspect.Parameter.VAR_POSITIONAL in kinds
    for i, param in enumerate(sig.parameters.values()):
        if param.kind is inspect.Parameter.KEYWORD_ONLY and not star_done:
            out.append("*")
            star_done = True
        out.append(_param(param))
        nxt = kinds[i + 1] if i + 1 < len(kinds) else None
        if param.kind is inspect.Parameter.POSITIONAL_ONLY and nxt is not param.kind:
            out.append("/")
    return out


def _signature_line(head: str, sig: inspect.Signature | None, indent: str) -> str:
    """``head(params) -> ret:``, one parameter a line when it is longer than ``WIDTH``."""
    if sig is None:
        return f"{indent}{head}(...):"
    params = _params(sig)
    ret = _annotation(sig.return_annotation)
    tail = f" -> {ret}:" if ret else ":"
    line = f"{indent}{head}({', '.join(params)}){tail}"
    if len(line) <= WIDTH or not params:
        return line
    inner = "".join(f"{indent}    {p},\n" for p in params)
    return f"{indent}{head}(\n{inner}{indent}){tail}"


def _signature(obj: Any) -> inspect.Signature | None:
    try:
        return inspect.signature(obj)
    except (TypeError, ValueError):
        return None


def own_docstring(obj: Any) -> str | None:
    """The docstring ``obj`` was given in its source, or ``None``.

    Inherited docstrings do not count, nor the one ``dataclasses`` makes up from the fields
    (``DriftReport(model: 'str', ...)``).
    """
    doc = obj.__dict__.get("__doc__") if inspect.isclass(obj) else getattr(obj, "__doc__", None)
    if not isinstance(doc, str) or not doc.strip():
        return None
    if dataclasses.is_dataclass(obj) and doc.startswith(f"{obj.__name__}("):
        return None
    return inspect.cleandoc(doc)


def _docstring(obj: Any, indent: str) -> str:
    """The object's own docstring as a triple-quoted block, or ``...`` when it has none."""
    doc = own_docstring(obj)
    if doc is None:
        return f"{indent}    ...\n"
    lines = doc.replace('"""', r"\"\"\"").splitlines()
    if len(lines) == 1 and not lines[0].startswith('"'):
        return f'{indent}    """{lines[0]}"""\n'
    lines[0] = '"""' + ("\\" if lines[0].startswith('"') else "") + lines[0]
    body = "".join(f"{indent}    {line}\n" if line else "\n" for line in lines)
    return f'{body}{indent}    """\n'


def _is_pydantic(cls: type) -> bool:
    return any(base.__name__ == "BaseModel" for base in cls.__mro__[1:])


def _source_annotations(cls: type) -> dict[str, str]:
    """Field annotations as written, the nearest class in the MRO winning."""
    found: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        found.update({k: _annotation(v) for k, v in vars(klass).get("__annotations__", {}).items()})
    return found


def _fields(cls: type, indent: str) -> str:
    """A pydantic model's fields, one a line: ``name: annotation = default``."""
    notes = _source_annotations(cls)
    lines = []
    for name, field in cls.model_fields.items():  # type: ignore[attr-defined]
        line = f"{indent}    {name}: {notes.get(name, _annotation(field.annotation))}"
        if field.default_factory is not None:
            line += f" = Field(default_factory={_default(field.default_factory)})"
        elif not field.is_required():
            line += f" = {_default(field.default)}"
        lines.append(line)
    return "\n".join(lines) + "\n" if lines else ""


def _function(name: str, func: Callable[..., Any], indent: str, decorator: str = "") -> str:
    word = "async def" if inspect.iscoroutinefunction(func) else "def"
    head = f"{indent}{decorator}\n" if decorator else ""
    return (
        head
        + _signature_line(f"{word} {name}", _signature(func), indent)
        + "\n"
        + (_docstring(func, indent))
    )


def _members(cls: type, indent: str) -> Iterator[str]:
    """The public methods and properties ``cls`` defines itself, in source order."""
    for name, value in vars(cls).items():
        if name.startswith("_"):
            continue
        if isinstance(value, property | functools.cached_property):
            getter = value.fget if isinstance(value, property) else value.func
            if getter is not None:
                yield _function(name, getter, indent, "@property")
        elif isinstance(value, classmethod | staticmethod):
            word = "@classmethod" if isinstance(value, classmethod) else "@staticmethod"
            yield _function(name, value.__func__, indent, word)
        elif inspect.isfunction(value):
            yield _function(name, value, indent)


def _class(name: str, cls: type) -> str:
    bases = [b.__name__ for b in cls.__bases__ if b is not object]
    head = f"class {name}({', '.join(bases)}):" if bases else f"class {name}:"
    parts = [head + "\n", _docstring(cls, "")]
    if _is_pydantic(cls):
        parts.append("\n" + _fields(cls, ""))
    elif dataclasses.is_dataclass(cls) or "__init__" in vars(cls):
        init = cls.__init__ if "__init__" in vars(cls) else None
        sig = _factories_shown(cls, _signature(cls))
        if init is not None or sig is not None:
            init_line = _signature_line("def __init__", _with_self(sig), "    ")
            parts.append("\n" + init_line + " ...\n")
    parts.extend("\n" + member for member in _members(cls, "    "))
    return "".join(parts)


class _Shown:
    """A default shown as source text (``field(default_factory=list)``, not ``<factory>``)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _factories_shown(cls: type, sig: inspect.Signature | None) -> inspect.Signature | None:
    """``sig`` with each dataclass field's default factory written as in the source."""
    if sig is None or not dataclasses.is_dataclass(cls):
        return sig
    factories = {
        f.name: f.default_factory
        for f in dataclasses.fields(cls)
        if f.default_factory is not dataclasses.MISSING
    }
    params = [
        p.replace(default=_Shown(f"field(default_factory={_default(factories[p.name])})"))
        if p.name in factories
        else p
        for p in sig.parameters.values()
    ]
    return sig.replace(parameters=params)


def _with_self(sig: inspect.Signature | None) -> inspect.Signature | None:
    if sig is None:
        return None
    self_param = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return sig.replace(parameters=[self_param, *sig.parameters.values()], return_annotation="None")


def _comment_for(module: ModuleType, name: str) -> str:
    """The ``#:`` comment lines just above ``name = ...`` in ``module``'s source, if any."""
    try:
        lines = inspect.getsource(module).splitlines()
    except (OSError, TypeError):
        return ""
    for i, line in enumerate(lines):
        if re.match(rf"^{re.escape(name)}\s*[:=]", line):
            notes = []
            j = i - 1
            while j >= 0 and lines[j].startswith("#:"):
                notes.insert(0, lines[j][2:].strip())
                j -= 1
            return " ".join(notes)
    return ""


def _constant(name: str, value: Any, module: ModuleType) -> str:
    """``NAME: annotation = value`` with the ``#:`` comment above it in its source; a dict one
    entry a line."""
    note = _annotation(vars(module).get("__annotations__", {}).get(name, type(value)))
    comment = _comment_for(module, name)
    if isinstance(value, dict) and value:
        text = "{\n" + "".join(f"    {k!r}: {v!r},\n" for k, v in value.items()) + "}"
    else:
        text = repr(value)
    head = f"# {comment}\n" if comment else ""
    return f"{head}{name}: {note} = {text}\n"


def _constant_module(name: str, package: ModuleType) -> ModuleType:
    """The module whose source assigns ``name`` (a package's lazy ``_EXPORTS`` says which)."""
    where = getattr(package, "_EXPORTS", {}).get(name)
    return importlib.import_module(where) if where else package


def _defining_module(obj: Any, fallback: ModuleType) -> ModuleType:
    module = sys.modules.get(getattr(obj, "__module__", "") or "")
    return module if module is not None else fallback


def _source_path(module: ModuleType) -> str:
    file = Path(module.__file__ or "")
    root = Path(importlib.import_module(PACKAGE).__file__ or "").parent.parent
    return file.relative_to(root).as_posix()


def entry(name: str, obj: Any, module: ModuleType, qualified: str) -> str:
    """The Markdown section for one public name."""
    if inspect.isclass(obj):
        body = _class(name, obj)
    elif inspect.isfunction(obj) or inspect.iscoroutinefunction(obj):
        body = _function(name, obj, "")
    else:
        module = _constant_module(name, module)
        body = _constant(name, obj, module)
    where = _defining_module(obj, module)
    source = f"Defined in `{_source_path(where)}`.\n\n" if where.__file__ else ""
    return f"### `{qualified}`\n\n{source}```python\n{body.rstrip()}\n```\n"


def public_names() -> list[tuple[str, str, Any, ModuleType]]:
    """``(section, name, object, module)`` for every name the page documents, in page order."""
    top = importlib.import_module(PACKAGE)
    out = [(PACKAGE, name, getattr(top, name), top) for name in top.__all__]
    for sub in SUBPACKAGES:
        module = importlib.import_module(f"{PACKAGE}.{sub}")
        for name in getattr(module, "__all__", []):
            value = getattr(module, name)
            if name in top.__all__ and _unwrap(getattr(top, name)) is _unwrap(value):
                continue  # the same object as the top-level name, documented there
            out.append((f"{PACKAGE}.{sub}", name, value, module))
    return out


def _unwrap(value: Any) -> Any:
    return (
        getattr(value, value.__name__.rsplit(".", 1)[-1], value)
        if isinstance(value, ModuleType)
        else value
    )


_GROUP = re.compile(r"^    # -- (?P<title>[^:]+): (?P<about>.+)$")
_NAME = re.compile(r"^    from [\w.]+ import (\w+) as \1$")


def groups() -> list[tuple[str, str, list[str]]]:
    """``(title, about, names)`` for each ``# -- Title: about`` group of the package root's
    ``TYPE_CHECKING`` block, the one table of the public surface, in its order."""
    top = importlib.import_module(PACKAGE)
    out: list[tuple[str, str, list[str]]] = []
    for line in Path(top.__file__ or "").read_text(encoding="utf-8").splitlines():
        if match := _GROUP.match(line):
            out.append((match["title"], match["about"], []))
        elif (name := _NAME.match(line)) and out:
            out[-1][2].append(name[1])
    return out


def _index(names: list[str], section: str) -> str:
    return ", ".join(f"[`{n}`](#{_anchor(f'{section}.{n}')})" for n in names)


def render() -> str:
    """Return the Markdown page for the public API as it is now."""
    names = public_names()
    found = {(s, n): (obj, mod) for s, n, obj, mod in names}
    top = importlib.import_module(PACKAGE)
    parts = [_INTRO]
    table = groups()
    doc = inspect.cleandoc(top.__doc__ or "")
    overview = "".join(
        f"- {title}, {about}: {_index(sorted(own), PACKAGE)}\n" for title, about, own in table
    )
    parts.append(f"## `{PACKAGE}`\n\n```text\n{doc}\n```\n\n{overview}")
    parts.append(entry("__version__", top.__version__, top, f"{PACKAGE}.__version__"))
    for title, about, own in table:
        parts.append(f"## {title}\n\n{about[0].upper()}{about[1:]}.\n")
        for n in sorted(own):
            obj, mod = found[(PACKAGE, n)]
            parts.append(entry(n, obj, mod, f"{PACKAGE}.{n}"))
    for section in (f"{PACKAGE}.{sub}" for sub in SUBPACKAGES):
        module = importlib.import_module(section)
        doc = inspect.cleandoc(module.__doc__ or "")
        own_sub = [(n, obj, mod) for s, n, obj, mod in names if s == section]
        index = _index([n for n, _, _ in own_sub], section)
        shared = [n for n in getattr(module, "__all__", []) if n not in {n for n, _, _ in own_sub}]
        if shared:
            also = _index(shared, PACKAGE)
            index += ("; " if index else "") + f"the same objects as `{PACKAGE}`'s: {also}"
        parts.append(f"## `{section}`\n\n```text\n{doc}\n```\n\n{index}\n")
        parts.extend(entry(n, obj, mod, f"{section}.{n}") for n, obj, mod in own_sub)
    return "\n".join(parts)


def _anchor(qualified: str) -> str:
    """GitHub's anchor for a ``### `name` `` heading: lowercase, dots and backticks dropped."""
    return re.sub(r"[^\w\- ]", "", qualified.lower()).replace(" ", "-")


def main() -> int:
    """Write the page and say whether it changed."""
    text = render()
    old = OUTPUT.read_text(encoding="utf-8") if OUTPUT.exists() else None
    if old == text:
        print(f"{OUTPUT.name} is up to date", file=sys.stderr)
        return 0
    from openrouter_probe.files import atomic_write_text

    atomic_write_text(OUTPUT, text)
    print(f"wrote {OUTPUT}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
