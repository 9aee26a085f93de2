"""The code blocks of README.md and docs/*.md run, so the docs cannot drift
from the code.

A block says whether it runs in its fence's info string (Markdown renderers
read only the first word, the language):

    ```python run                      runs here, in a fresh interpreter
    ```sh no-run: <why>                not run; the reason is required

Every python, sh, bash and console block carries one or the other; output
listings (```text, or a fence without a language) are not code. A runnable
block is written to a file named after its page and line and run in a
subprocess from a temporary folder (files it writes land there), with the
suite's environment (TORCH_TPU_CACHE_DIR included); a failure names the page
and line of the block and shows the end of its output. The hand-written table
of docs/environment_variables.md is checked against the declared variables.
"""
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CODE_LANGUAGES = {"python", "sh", "bash", "console"}
# A guard against a hung block, not a speed requirement.
TIMEOUT_S = 600

FENCE = re.compile(r"^(\s*)(```+)(.*)$")


def _pages():
    docs = os.path.join(ROOT, "docs")
    return [os.path.join(ROOT, "README.md")] + sorted(
        os.path.join(docs, f) for f in os.listdir(docs) if f.endswith(".md"))


def blocks(path):
    """[(line of the opening fence, language, marker, code)] of a Markdown file."""
    found, lines = [], open(path).read().split("\n")
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, info = m.groups()
        start, body = i + 1, []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i])
            i += 1
        i += 1
        language, _, marker = info.strip().partition(" ")
        found.append((start, language, marker.strip(), "\n".join(body) + "\n"))
    return found


def _all_blocks():
    for path in _pages():
        for line, language, marker, code in blocks(path):
            yield os.path.relpath(path, ROOT), line, language, marker, code


RUNNABLE = [(f"{page}:{line}", code) for page, line, language, marker, code in _all_blocks()
            if marker == "run"]


def test_every_code_block_says_whether_it_runs():
    wrong = []
    for page, line, language, marker, code in _all_blocks():
        if language not in CODE_LANGUAGES:
            continue
        if marker == "run":
            if language != "python":
                wrong.append(f"{page}:{line}: only python blocks run here (got {language})")
        elif not re.fullmatch(r"no-run: \S.*", marker):
            wrong.append(f"{page}:{line}: a {language} block needs `run` or `no-run: <why>`, "
                         f"got {marker!r}")
    assert not wrong, "\n".join(wrong)


def test_the_block_reader():
    # The run test below passes only if blocks are found as written.
    text = ("# t\n\n```python run\nprint(1)\n```\n\n- item\n\n  ```sh no-run: slow\n  make x\n  ```\n"
            "\n```\nplain output\n```\n")
    path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"docs_reader_{os.getpid()}.md")
    with open(path, "w") as f:
        f.write(text)
    try:
        assert blocks(path) == [(3, "python", "run", "print(1)\n"),
                                (9, "sh", "no-run: slow", "make x\n"),
                                (13, "", "", "plain output\n")]
    finally:
        os.remove(path)
    assert RUNNABLE, "README.md and docs/ have no runnable block"


@pytest.mark.parametrize("where,code", RUNNABLE, ids=[w for w, _ in RUNNABLE])
def test_docs_example_runs(where, code, tmp_path):
    script = tmp_path / (re.sub(r"[^A-Za-z0-9]+", "_", where) + ".py")
    script.write_text(code)
    r = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True,
                       timeout=TIMEOUT_S, env=dict(os.environ))
    assert r.returncode == 0, (f"{where}: the example failed (exit {r.returncode})\n"
                               f"--- stdout\n{r.stdout[-3000:]}\n--- stderr\n{r.stderr[-3000:]}")


def test_environment_variables_page_lists_every_variable():
    # The table in docs/environment_variables.md is written by hand; the
    # variables themselves are declared once, in csrc/common/env.h.
    import torch_tpu

    page = open(os.path.join(ROOT, "docs", "environment_variables.md")).read()
    documented = re.findall(r"^\| `([A-Z][A-Z0-9_]*)", page, re.M)
    declared = [row[0] for row in torch_tpu.env_table()]
    assert sorted(documented) == sorted(declared)
