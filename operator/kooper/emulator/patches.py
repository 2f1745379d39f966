"""Patch formats the API server accepts: JSON merge patch and JSON patch.

Strategic-merge patches are applied as merge patches (lists are replaced as
a whole, not merged by key): the emulator knows no Go struct tags.
JSON patch (RFC 6902) is implemented here in full, because kopf guards its
finalizer and progress writes with a `test` op on `/metadata/resourceVersion`
and relies on the 422 answer when that test fails.
"""

import copy
from collections.abc import Mapping, Sequence
from typing import Any


class PatchError(ValueError):
    """A patch that cannot be applied: the API server answers 422 (or 400 if malformed)."""

    def __init__(self, message: str, *, malformed: bool = False) -> None:
        super().__init__(message)
        self.malformed = malformed


def merge(target: Any, patch: Any) -> Any:
    """Apply an RFC 7386 merge patch; returns a new value and leaves both inputs untouched."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    result: dict[str, Any] = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge(result.get(key), value)
    return result


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def _tokens(pointer: str) -> list[str]:
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise PatchError(f"invalid JSON pointer: {pointer!r}", malformed=True)
    return [_unescape(token) for token in pointer[1:].split("/")]


def _index(container: list[Any], token: str, *, for_insert: bool) -> int:
    if token == "-" and for_insert:
        return len(container)
    if not token.isdigit() or (len(token) > 1 and token.startswith("0")):
        raise PatchError(f"invalid list index: {token!r}")
    index = int(token)
    limit = len(container) if for_insert else len(container) - 1
    if index > limit:
        raise PatchError(f"list index out of range: {index}")
    return index


def _parent(doc: Any, tokens: list[str]) -> Any:
    node = doc
    for token in tokens[:-1]:
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list):
            node = node[_index(node, token, for_insert=False)]
        else:
            raise PatchError(f"path not found: /{'/'.join(tokens)}")
    return node


def _get(doc: Any, pointer: str) -> Any:
    tokens = _tokens(pointer)
    if not tokens:
        return doc
    parent = _parent(doc, tokens)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"path not found: {pointer}")
        return parent[last]
    if isinstance(parent, list):
        return parent[_index(parent, last, for_insert=False)]
    raise PatchError(f"path not found: {pointer}")


def _remove(doc: Any, pointer: str) -> Any:
    tokens = _tokens(pointer)
    if not tokens:
        raise PatchError("cannot remove the whole document")
    parent = _parent(doc, tokens)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"path not found: {pointer}")
        return parent.pop(last)
    if isinstance(parent, list):
        return parent.pop(_index(parent, last, for_insert=False))
    raise PatchError(f"path not found: {pointer}")


def _add(doc: Any, pointer: str, value: Any, *, replace: bool) -> Any:
    tokens = _tokens(pointer)
    if not tokens:
        return value
    parent = _parent(doc, tokens)
    last = tokens[-1]
    if isinstance(parent, dict):
        if replace and last not in parent:
            raise PatchError(f"path not found: {pointer}")
        parent[last] = value
    elif isinstance(parent, list):
        if replace:
            parent[_index(parent, last, for_insert=False)] = value
        else:
            parent.insert(_index(parent, last, for_insert=True), value)
    else:
        raise PatchError(f"path not found: {pointer}")
    return doc


def json_patch(target: Any, ops: Any) -> Any:
    """Apply an RFC 6902 JSON patch; returns a new document, the input stays untouched."""
    if not isinstance(ops, Sequence) or isinstance(ops, str | bytes):
        raise PatchError("a JSON patch must be a list of operations", malformed=True)
    doc = copy.deepcopy(target)
    for op in ops:
        if not isinstance(op, Mapping) or "op" not in op or "path" not in op:
            raise PatchError(f"malformed operation: {op!r}", malformed=True)
        name, path = op["op"], op["path"]
        if name in ("add", "replace", "test") and "value" not in op:
            raise PatchError(f"operation {name!r} needs a value", malformed=True)
        if name == "add":
            doc = _add(doc, path, copy.deepcopy(op["value"]), replace=False)
        elif name == "replace":
            doc = _add(doc, path, copy.deepcopy(op["value"]), replace=True)
        elif name == "remove":
            _remove(doc, path)
        elif name == "test":
            if _get(doc, path) != op["value"]:
                raise PatchError(f"test failed at {path}: value differs from {op['value']!r}")
        elif name in ("move", "copy"):
            if "from" not in op:
                raise PatchError(f"operation {name!r} needs 'from'", malformed=True)
            value = _remove(doc, op["from"]) if name == "move" else copy.deepcopy(
                _get(doc, op["from"]))
            doc = _add(doc, path, value, replace=False)
        else:
            raise PatchError(f"unknown operation: {name!r}", malformed=True)
    return doc
