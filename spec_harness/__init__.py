"""spec_harness: the project's one import package. Its subpackages are the repository's folders
core/, models/, runtimes/, reports/ and harness/ (docs/DESIGN.md, "Floors"): an installed wheel has
them inside this package; in a checkout they stay at the top, and this package's path reaches them
there."""

from pathlib import Path

_CHECKOUT = Path(__file__).resolve().parent.parent
if not (Path(__file__).resolve().parent / "core").is_dir() and (_CHECKOUT / "core" / "__init__.py").is_file():
    __path__.append(str(_CHECKOUT))
