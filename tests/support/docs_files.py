"""The documentation the tests read: README.md and the pages of docs/ (the mkdocs site).

Claims (`<!-- readme-check: NAME -->`) and code blocks (`<!-- readme-test: ... -->`) may sit on
any of these pages; each claim on one page only.

    python -m tests.support.docs_files refresh-info

writes what `python -m jax_triton_rocm info` prints now, on a machine without a GPU and with none
of the package's, Triton's or JAX's variables set, into the page that shows it (after a change to
`info`, or to the versions pip installs); tests/process/test_readme_claims_processes.py checks
the sample against the command.
"""

from __future__ import annotations

import os
import re
import sys

from tests.support.subprocess_utils import ROOT

DOCS_FOLDER = os.path.join(ROOT, "docs")


def doc_files() -> list[str]:
    """README.md, then every docs/*.md, as paths relative to the repository."""
    pages = sorted(name for name in os.listdir(DOCS_FOLDER) if name.endswith(".md"))
    return ["README.md"] + [f"docs/{name}" for name in pages]


def read(path: str) -> str:
    with open(os.path.join(ROOT, path), encoding="utf-8") as file:
        return file.read()


def all_text() -> str:
    """Every documentation file's text, one after the other."""
    return "\n".join(read(path) for path in doc_files())


def claim_pattern(name: str) -> re.Pattern[str]:
    """The comment `<!-- readme-check: NAME -->` and the fenced block or table after it."""
    return re.compile(rf"^<!-- readme-check: {re.escape(name)} -->\n"
                      r"(```\w*\n.*?^```|(?:^\|[^\n]*\n)+)", re.M | re.S)


def claim_location(name: str) -> tuple[str, re.Match[str]]:
    """The one file holding claim `name`, and the match of `claim_pattern` in it."""
    found = [(path, match) for path in doc_files()
             for match in claim_pattern(name).finditer(read(path))]
    assert len(found) == 1, (f"readme-check {name!r} must appear on exactly one page; found in "
                             f"{[path for path, _ in found] or 'none'}")
    return found[0]


def claim(name: str) -> str:
    """The fenced block or table that follows `<!-- readme-check: NAME -->` on its page."""
    _, match = claim_location(name)
    return re.sub(r"^```\w*\n|^```$", "", match.group(1), flags=re.M)


def info_shape(text: str) -> list[str]:
    """Each line of `info`'s text as its label: versions, quoted values, variable values and
    everything after a line's first ': ' dropped, except that a yes/no answer must stay one
    (which of the two depends on the installed jaxlib)."""
    shape = []
    for line in text.strip("\n").splitlines():
        line = re.sub(r"\d+(\.\d+)+", "V", line)
        line = re.sub(r"'[^']*'", "'…'", line)
        line = re.sub(r"^(\s+[A-Z][A-Z0-9_]+)(=.*| unset)$", r"\1", line)
        label, sep, value = line.partition(": ")
        shape.append(label + (": yes/no" if value in ("yes", "no") else sep))
    return shape


# What the documentation shows is what a new user's machine prints: none of these set.
_USER_UNSET = re.compile(r"(JAX_TRITON_ROCM_|TRITON_|JAX_PLATFORMS$|XLA_FLAGS$)")


def info_without_gpu() -> str:
    """`python -m jax_triton_rocm info` on this machine as on one without a GPU (no jaxlib GPU
    plugin) and without the package's, Triton's or JAX's variables set, as the page shows it:
    without its "JAX start-up:" section (what JAX reported while starting)."""
    from tests.support.subprocess_utils import WITHOUT_GPU_PLUGINS, run_python

    unset = "".join(f"os.environ.pop({name!r}, None)\n"
                    for name in os.environ if _USER_UNSET.match(name))
    result = run_python("import os\n" + unset + "os.environ.pop('TRITON_DEFAULT_FP_FUSION', None)",
                        WITHOUT_GPU_PLUGINS,
                        "import sys\nfrom jax_triton_rocm.__main__ import main\n"
                        "sys.exit(main(['info']))")
    if result.returncode != 0:
        raise RuntimeError(f"info failed ({result.returncode}):\n{result.stderr[-3000:]}")
    return without_startup_notes(result.stdout)


def without_startup_notes(text: str) -> str:
    """`text` without info's "JAX start-up:" section, which lists what JAX itself reported while
    starting: on a GPU machine whose plugins are hidden, JAX reports what it skipped; the page
    shows a machine without a GPU, where it reports nothing."""
    return re.sub(r"^JAX start-up:\n(?:[ \t]+.*\n)*", "", text, flags=re.M)


def refresh_info_sample() -> str:
    """Writes `info_without_gpu()` into the page holding the `info-without-gpu` claim; returns
    that page's path."""
    path, match = claim_location("info-without-gpu")
    text = read(path)
    block = "```text\n" + info_without_gpu().rstrip("\n") + "\n```"
    start, end = match.span(1)
    with open(os.path.join(ROOT, path), "w", encoding="utf-8") as file:
        file.write(text[:start] + block + text[end:])
    return path


if __name__ == "__main__":
    if sys.argv[1:] != ["refresh-info"]:
        sys.exit("usage: python -m tests.support.docs_files refresh-info")
    print(f"wrote info's output into {refresh_info_sample()}")
