"""Which checkout files a kernel's compile-cache key covers (flybench.compile.sources), on a made-up checkout."""

from pathlib import Path

from flybench.compile import registry, runner
from flybench.compile.sources import kernel_sources, module_file

TREE = {
    "kernels/__init__.py": "",
    "kernels/common/__init__.py": "",
    "kernels/common/helpers.py": "import math\n",
    "kernels/common/unused.py": "",
    "kernels/attention/__init__.py": "",
    "kernels/attention/flash_attn_generic.py": (
        "import flydsl.expr as fx\nfrom kernels.common.helpers import x\n"
        "def build():\n    from .flash_attn_utils import y\n"),
    "kernels/attention/flash_attn_utils.py": "from kernels.common import helpers\n",
    "kernels/moe/__init__.py": "",
    "kernels/moe/moe_gemm_2stage/__init__.py": "from .gemm1 import compile_moe_gemm1\n",
    "kernels/moe/moe_gemm_2stage/gemm1.py": "from ..moe_sorting import s\n",
    "kernels/moe/moe_sorting.py": "",
}


def make_checkout(root: Path, tree: dict[str, str] = TREE) -> Path:
    for name, text in tree.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def names(root: Path, files: list[Path]) -> list[str]:
    return [str(f.relative_to(root)) for f in files]


def test_follows_absolute_relative_and_nested_imports_and_package_inits(tmp_path):
    src = make_checkout(tmp_path)
    assert names(src, kernel_sources(src, "kernels/attention/flash_attn_generic.py")) == [
        "kernels/__init__.py", "kernels/attention/__init__.py", "kernels/attention/flash_attn_generic.py",
        "kernels/attention/flash_attn_utils.py", "kernels/common/__init__.py", "kernels/common/helpers.py"]


def test_a_module_that_became_a_package_is_found_either_way(tmp_path):
    src = make_checkout(tmp_path)
    assert names(src, kernel_sources(src, "kernels/moe/moe_gemm_2stage")) == [
        "kernels/__init__.py", "kernels/moe/__init__.py", "kernels/moe/moe_gemm_2stage/__init__.py",
        "kernels/moe/moe_gemm_2stage/gemm1.py", "kernels/moe/moe_sorting.py"]
    old = make_checkout(tmp_path / "old", {"kernels/__init__.py": "", "kernels/moe/moe_gemm_2stage.py": ""})
    assert module_file(old, "kernels/moe/moe_gemm_2stage") == old / "kernels/moe/moe_gemm_2stage.py"
    assert module_file(old, "kernels/attention/pa_decode_tile.py") is None
    assert kernel_sources(old, "kernels/attention/pa_decode_tile.py") == []


def test_key_changes_with_the_kernels_own_files_only(tmp_path):
    src = make_checkout(tmp_path)
    case = registry.get_case("flash_attn_generic:causal_m128")
    before = runner._source(case, src)["hash"]
    (src / "kernels/common/unused.py").write_text("changed = 1\n")
    (src / "kernels/moe/moe_sorting.py").write_text("changed = 1\n")
    assert runner._source(case, src)["hash"] == before
    (src / "kernels/common/helpers.py").write_text("import math  # changed\n")
    assert runner._source(case, src)["hash"] != before
