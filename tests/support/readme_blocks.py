"""The ```python blocks of README.md and of the pages of docs/, and how each runs (the tests:
tests/cpu/test_readme.py, tests/gpu/test_readme_gpu.py, tests/process/test_readme_processes.py).

An HTML comment on the line before a block says how it is run, e.g.
`<!-- readme-test: name=add -->`, `<!-- readme-test: gpu, after=add -->`:
  - name=NAME: later blocks of the same page can run after this one;
  - after=NAME: this block runs after NAME's code (and whatever NAME runs after);
  - gpu: needs a GPU; runs in the GPU tests (skipped here with the reason);
  - requires=MODULE: skipped, with the reason, where MODULE is not installed;
  - prints: what the block prints is the ```text block that follows it, exactly;
  - process: runs in a fresh Python process of its own (it sets what JAX reads when it starts,
    such as XLA_FLAGS), as a test marked `process`.
Blocks without a comment run on the CPU by themselves (on a GPU machine, on its GPU). Each block
runs from a file of its own (Triton reads a kernel's source from its file), in a namespace of its
own, in one interpreter shared by the blocks a test worker runs (`SharedInterpreter`): only what
is imported is shared.
"""

import dataclasses
import importlib.util
import os
import re

import pytest

from tests.support import docs_files
from tests.support.subprocess_utils import SharedInterpreter, run_script

FENCE = re.compile(r"(?:^<!-- readme-test: (?P<options>[^>]*) -->\n)?^```python\n(?P<code>.*?)^```$"
                   r"(?:\n\n```text\n(?P<shown>.*?)^```$)?", re.M | re.S)


@dataclasses.dataclass
class Block:
    page: str
    line: int
    code: str
    name: str | None = None
    after: str | None = None
    gpu: bool = False
    requires: tuple[str, ...] = ()
    prints: str | None = None
    process: bool = False

    @property
    def where(self) -> str:
        return f"{self.page} line {self.line}"


def page_blocks(page: str) -> list[Block]:
    text = docs_files.read(page)
    blocks = []
    for match in FENCE.finditer(text):
        block = Block(page=page, line=text.count("\n", 0, match.start("code")) + 1,
                      code=match["code"])
        for option in filter(None, (o.strip() for o in (match["options"] or "").split(","))):
            key, _, value = option.partition("=")
            if key in ("gpu", "process"):
                setattr(block, key, True)
            elif key == "requires":
                block.requires += (value,)
            elif key in ("name", "after"):
                setattr(block, key, value)
            elif key == "prints":
                if match["shown"] is None:
                    raise ValueError(f"{block.where}: 'prints' needs a ```text block after it")
                block.prints = match["shown"]
            else:
                raise ValueError(f"{block.where}: unknown readme-test option {key!r}")
        blocks.append(block)
    return blocks


PAGES = docs_files.doc_files()
BLOCKS = [block for page in PAGES for block in page_blocks(page)]
NAMED = {(block.page, block.name): block for block in BLOCKS if block.name}


def full_code(block: Block) -> str:
    """The block's code after the code of the blocks it runs after, in order."""
    chain = [block]
    while chain[0].after is not None:
        chain.insert(0, NAMED[(block.page, chain[0].after)])
    return "\n".join(b.code for b in chain)


def requirements(block: Block) -> tuple[str, ...]:
    needed = list(block.requires)
    while block.after is not None:
        block = NAMED[(block.page, block.after)]
        needed += block.requires
    return tuple(needed)


def run_block(block: Block, folder, interpreter: SharedInterpreter) -> None:
    for module in requirements(block):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{block.where} needs {module}, which is not installed")
    script = folder / f"{os.path.basename(block.page)[:-3]}_line{block.line}.py"
    script.write_text(full_code(block))
    if block.process:
        done = run_script(script, cwd=folder, timeout=600)
        result = {"ok": done.returncode == 0, "stdout": done.stdout, "stderr": done.stderr,
                  "error": f"exit status {done.returncode}"}
    else:
        result = interpreter.run(script, cwd=folder)
    assert result["ok"], (f"{block.where}: the block failed:\n{result['stdout'][-2000:]}\n"
                          f"{result['stderr'][-2000:]}\n{result['error'][-4000:]}")
    if block.prints is not None:
        assert result["stdout"] == block.prints, (
            f"{block.where} prints\n{result['stdout']}\nwhere the page shows\n{block.prints}")


CPU_BLOCKS = [b for b in BLOCKS if not b.gpu]
GPU_BLOCKS = [b for b in BLOCKS if b.gpu]


def block_ids(blocks):
    return [f"{b.page.replace('/', '-')}-line{b.line}" for b in blocks]


def block_params(blocks):
    return [pytest.param(b, marks=[pytest.mark.process] if b.process else [], id=i)
            for b, i in zip(blocks, block_ids(blocks))]
