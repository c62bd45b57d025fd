"""Compiles the message catalogs (`.po` to `.mo`) when the package is built or installed.

Everything else about the package is in pyproject.toml; this file only adds the step
to `build_py`, with Babel (a build requirement there).
"""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

LOCALES = Path(__file__).resolve().parent / "gateway" / "i18n" / "locales"


class BuildWithCatalogs(build_py):
    def run(self) -> None:
        from babel.messages.mofile import write_mo
        from babel.messages.pofile import read_po

        for po in sorted(LOCALES.glob("*/LC_MESSAGES/*.po")):
            with po.open("rb") as source:
                catalog = read_po(source)
            with po.with_suffix(".mo").open("wb") as out:
                write_mo(out, catalog)
        super().run()


setup(cmdclass={"build_py": BuildWithCatalogs})
