"""The package declares what it imports: every module it imports from outside the standard
library belongs to a distribution named in pyproject.toml (its dependencies, or an extra for
the optional parts), not one that happens to arrive with another."""

from __future__ import annotations

import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _name(requirement: str) -> str:
    """A requirement's distribution name, normalised (PEP 503)."""
    found = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement)
    assert found, requirement
    return re.sub(r"[-_.]+", "-", found.group(0)).lower()


def _declared() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    requirements = list(project["dependencies"])
    for extra in project.get("optional-dependencies", {}).values():
        requirements += extra
    return {_name(r) for r in requirements}


# An absolute import statement at the start of a line: `import a.b, c` or `from a.b import x`.
_IMPORT = re.compile(r"^[ \t]*(?:import[ \t]+([\w., \t]+?)[ \t]*(?:#.*)?$"
                     r"|from[ \t]+(\w[\w.]*)[ \t]+import\b)", re.MULTILINE)


def _imported() -> dict[str, str]:
    """Top-level modules the package imports (absolute imports), each with a file that does
    (read by pattern: parsing every module takes seconds)."""
    found: dict[str, str] = {}
    for path in sorted((ROOT / "pocketmcp").rglob("*.py")):
        for plain, source in _IMPORT.findall(path.read_text(encoding="utf-8")):
            for name in [n.split(" as ")[0] for n in plain.split(",")] if plain else [source]:
                found.setdefault(name.strip().split(".")[0], str(path.relative_to(ROOT)))
    return found


def test_every_imported_distribution_is_declared() -> None:
    declared = _declared()
    owners = packages_distributions()
    missing = {}
    for module, where in _imported().items():
        if module in sys.stdlib_module_names or module in ("pocketmcp", "__future__"):
            continue
        dists = {_name(d) for d in owners.get(module, [])}
        assert dists, f"{module} (imported by {where}) is installed by no distribution"
        if not dists & declared:
            missing[module] = (where, sorted(dists))
    assert not missing, f"imported but not declared in pyproject.toml: {missing}"
