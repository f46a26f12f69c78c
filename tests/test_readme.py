"""Every ```python block of README.md runs as written, each in a fresh process.

An HTML comment on the line before a block says how it is run, e.g.
`<!-- readme-test: name=add -->`, `<!-- readme-test: gpu, after=add -->`:
  - name=NAME: later blocks can run after this one;
  - after=NAME: this block runs after NAME's code (and whatever NAME runs after);
  - gpu: needs a GPU; runs in the GPU tests (skipped here with the reason);
  - requires=MODULE: skipped, with the reason, where MODULE is not installed.
Blocks without a comment run on the CPU by themselves. Also: the examples teach the public API.
"""

import dataclasses
import importlib.util
import os
import re
import subprocess
import sys

import pytest

from tests.subprocess_utils import ROOT

FENCE = re.compile(r"(?:^<!-- readme-test: (?P<options>[^>]*) -->\n)?^```python\n(?P<code>.*?)^```$",
                   re.M | re.S)


@dataclasses.dataclass
class Block:
    line: int
    code: str
    name: str | None = None
    after: str | None = None
    gpu: bool = False
    requires: tuple[str, ...] = ()


def readme_blocks() -> list[Block]:
    with open(os.path.join(ROOT, "README.md")) as readme:
        text = readme.read()
    blocks = []
    for match in FENCE.finditer(text):
        block = Block(line=text.count("\n", 0, match.start("code")) + 1, code=match["code"])
        for option in filter(None, (o.strip() for o in (match["options"] or "").split(","))):
            key, _, value = option.partition("=")
            if key == "gpu":
                block.gpu = True
            elif key == "requires":
                block.requires += (value,)
            elif key in ("name", "after"):
                setattr(block, key, value)
            else:
                raise ValueError(f"README.md line {block.line}: unknown readme-test option {key!r}")
        blocks.append(block)
    return blocks


BLOCKS = readme_blocks()
NAMED = {block.name: block for block in BLOCKS if block.name}


def full_code(block: Block) -> str:
    """The block's code after the code of the blocks it runs after, in order."""
    chain = [block]
    while chain[0].after is not None:
        chain.insert(0, NAMED[chain[0].after])
    return "\n".join(b.code for b in chain)


def requirements(block: Block) -> tuple[str, ...]:
    needed = list(block.requires)
    while block.after is not None:
        block = NAMED[block.after]
        needed += block.requires
    return tuple(needed)


def run_block(block: Block, folder) -> None:
    """Runs the block from a file of its own (Triton reads a kernel's source from its file)."""
    for module in requirements(block):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"README.md line {block.line} needs {module}, which is not installed")
    script = folder / f"readme_line{block.line}.py"
    script.write_text(full_code(block))
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    result = subprocess.run([sys.executable, str(script)], cwd=folder, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, (
        f"README.md block at line {block.line} failed:\n{result.stdout[-2000:]}\n"
        f"{result.stderr[-4000:]}")


CPU_BLOCKS = [b for b in BLOCKS if not b.gpu]
GPU_BLOCKS = [b for b in BLOCKS if b.gpu]


def test_the_readme_has_blocks_of_both_kinds():
    assert CPU_BLOCKS and GPU_BLOCKS


def test_every_after_names_an_earlier_block():
    seen = set()
    for block in BLOCKS:
        assert block.after is None or block.after in seen, f"line {block.line}: {block.after}"
        seen.add(block.name)


@pytest.mark.parametrize("block", CPU_BLOCKS, ids=[f"line{b.line}" for b in CPU_BLOCKS])
def test_readme_block_runs_on_the_cpu(block, tmp_path):
    run_block(block, tmp_path)


@pytest.mark.gpu
@pytest.mark.parametrize("block", GPU_BLOCKS, ids=[f"line{b.line}" for b in GPU_BLOCKS])
def test_readme_block_runs_on_the_gpu(block, tmp_path):
    run_block(block, tmp_path)


@pytest.mark.parametrize("name", sorted(n for n in os.listdir(os.path.join(ROOT, "examples"))
                                         if n.endswith(".py")))
def test_examples_use_only_the_public_api(name):
    with open(os.path.join(ROOT, "examples", name)) as source:
        private = re.findall(r"jax_triton_rocm(?:\.|\s+import\s+)_\w+", source.read())
    assert not private, f"examples/{name} uses private modules: {private}"


def test_the_version_table_lists_the_ci_lanes():
    with open(os.path.join(ROOT, ".ci", "run")) as ci:
        lanes = set(re.findall(r'^\s+"([\w-]+)\|([\d.]+)\|([\d.]+)\|([\d.]+)"$', ci.read(), re.M))
    with open(os.path.join(ROOT, "README.md")) as readme:
        rows = set(re.findall(r"^\| ([\w-]+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|$",
                              readme.read(), re.M))
    assert lanes and rows == lanes
