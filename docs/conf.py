"""Sphinx configuration: Markdown pages (MyST), the Furo theme, the API from docstrings."""

from __future__ import annotations

import retry_transport

project = "retry-transport"
author = "retry-transport developers"
copyright = "retry-transport developers"
release = retry_transport.__version__
version = release

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",  # the docstrings' Args: / Returns: / Raises: sections
]

source_suffix = {".md": "markdown"}
exclude_patterns = ["_build"]
myst_enable_extensions = ["colon_fence"]
myst_heading_anchors = 3  # links to a page's sections: [text](budget.md#how-it-refills)

html_theme = "furo"
html_title = "retry-transport"
html_static_path = ["_static"]

autodoc_member_order = "bysource"
autodoc_default_options = {"members": True, "show-inheritance": True}
autodoc_typehints = "signature"
napoleon_google_docstring = True
napoleon_numpy_docstring = False


def _public_bases(app: object, name: str, obj: object, options: object, bases: list[type]) -> None:
    """Show a class's public bases only: a private base (the deadline middlewares' shared
    one) is how the package is built, not part of its API."""
    bases[:] = [base for base in bases if not base.__module__.startswith("retry_transport._")]


def setup(app: object) -> None:
    app.connect("autodoc-process-bases", _public_bases)  # type: ignore[attr-defined]
