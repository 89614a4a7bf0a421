"""No module of the product uses another module's private names (issue #22): a name with a leading
underscore is its module's own, so it can change without a reader of any other module noticing. A private
module (`controlplane/podgrouper/_common.py`) is its package's own the same way: only modules in that
package import it. What two modules share is public, in the module that owns the rule."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import kai_scheduler

SOURCE = Path(kai_scheduler.__file__).parent
ROOT = "kai_scheduler"


def _module_name(path: Path) -> str:
    parts = [ROOT, *path.relative_to(SOURCE).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _package_of(module: str) -> str:
    """The package a module's private parts belong to: the parent of its first private segment."""
    parts = module.split(".")
    first = next(i for i, part in enumerate(parts) if _is_private(part))
    return ".".join(parts[:first])


def _inside(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _foreign_private_module(module: str, target: str) -> bool:
    """`target` is a private module (or inside one) of a package `module` is not in."""
    return any(_is_private(part) for part in target.split(".")) and not _inside(module, _package_of(target))


def private_uses(source: str, module: str, *, is_package: bool, modules: set[str]) -> list[str]:
    """Where `module` (its source) reaches another project module's private name or private module."""
    tree = ast.parse(source)
    package = module if is_package else module.rpartition(".")[0]
    bound: dict[str, str] = {}  # local name -> the project module it stands for
    found: list[str] = []

    def reach(line: int, owner: str, name: str) -> None:
        target = f"{owner}.{name}"
        if target in modules:
            if _foreign_private_module(module, target):
                found.append(f"{module}:{line} imports private module {target}")
        elif _is_private(name) and owner != module:
            found.append(f"{module}:{line} uses {owner}.{name}")

    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            if not _inside(base, ROOT):
                continue
            if base in modules and _foreign_private_module(module, base):
                found.append(f"{module}:{node.lineno} imports private module {base}")
            for alias in node.names:
                reach(node.lineno, base, alias.name)
                if f"{base}.{alias.name}" in modules:
                    bound[alias.asname or alias.name] = f"{base}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if not _inside(alias.name, ROOT):
                    continue
                bound[alias.asname or ROOT] = alias.name if alias.asname else ROOT
                if _foreign_private_module(module, alias.name):
                    found.append(f"{module}:{node.lineno} imports private module {alias.name}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            owner = _dotted(node.value, bound)
            if owner is not None and owner in modules:
                reach(node.lineno, owner, node.attr)
    return sorted(set(found))


def _dotted(node: ast.expr, bound: dict[str, str]) -> str | None:
    """The project module an expression such as `kai_scheduler.model.cache` or `cache` stands for."""
    if isinstance(node, ast.Name):
        return bound.get(node.id)
    if isinstance(node, ast.Attribute):
        owner = _dotted(node.value, bound)
        return None if owner is None else f"{owner}.{node.attr}"
    return None


def _product() -> dict[str, Path]:
    return {_module_name(path): path for path in sorted(SOURCE.rglob("*.py"))}


MODULES = {
    "kai_scheduler.model.a",
    "kai_scheduler.model.b",
    "kai_scheduler.model",
    "kai_scheduler.pkg",
    "kai_scheduler.pkg._impl",
    "kai_scheduler.pkg.user",
}


@pytest.mark.parametrize(
    "source",
    [
        "from kai_scheduler.model.a import _helper",
        "from kai_scheduler.model.a import public, _helper as helper",
        "from . import a\na._helper()",
        "from .a import _Helper",
        "import kai_scheduler.model.a\nkai_scheduler.model.a._helper()",
        "import kai_scheduler.model.a as other\nother._CACHE.clear()",
        "from kai_scheduler.model import a as other\nprint(other._CACHE)",
        "from kai_scheduler.pkg._impl import thing",
        "from kai_scheduler.pkg import _impl",
        "import kai_scheduler.pkg._impl",
    ],
)
def test_a_private_name_or_module_reached_from_another_module_is_found(source: str) -> None:
    assert private_uses(source, "kai_scheduler.model.b", is_package=False, modules=MODULES)


@pytest.mark.parametrize(
    ("source", "module"),
    [
        ("from kai_scheduler.model.a import helper, Helper, __version__", "kai_scheduler.model.b"),
        (
            "def _mine() -> None: ...\n\nclass A:\n    def f(self):\n        self._x = _mine()",
            "kai_scheduler.model.b",
        ),
        ("import os\nos._exit(0)", "kai_scheduler.model.b"),  # the standard library's own API
        ("obj = make()\nobj._cache.clear()", "kai_scheduler.model.b"),  # an object, not a module
        ("from kai_scheduler.pkg._impl import thing", "kai_scheduler.pkg.user"),  # its package's own
        ("from ._impl import thing", "kai_scheduler.pkg.user"),
    ],
)
def test_public_names_own_names_and_a_packages_private_module_are_allowed(source: str, module: str) -> None:
    assert private_uses(source, module, is_package=False, modules=MODULES) == []


def test_no_product_module_uses_another_modules_private_names() -> None:
    product = _product()
    assert len(product) > 200  # the product was found
    names = set(product)
    found = [
        use
        for name, path in product.items()
        for use in private_uses(path.read_text(), name, is_package=path.name == "__init__.py", modules=names)
    ]
    assert found == []
