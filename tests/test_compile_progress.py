"""A long compile says how far it is: a line per kernel compiled with the count done and left, passed on by the
gate's compile half as it comes (it printed nothing for about 5.5 minutes on FlyDSL's #1009)."""

import sys

from test_compile import _own, cache_dir  # noqa: F401  (fixture)

from flybench.cli import gate
from flybench.compile import registry, runner


def test_each_kernel_compiled_is_a_line_with_the_count_done_and_left(cache_dir):  # noqa: F811
    cases = [_own("bug", "tests/kernels/misbehaving.py:fail", tile_k=96),
             _own("segfault", "tests/kernels/misbehaving.py:crash")]
    said: list[str] = []
    runner.measure([(c, "gfx942") for c in cases], force=True, parallel=1, progress=said.append)
    done = [line for line in said if line.startswith("compiled ")]
    assert done == ["compiled bug for gfx942: 1 of 2 done, 1 left", "compiled segfault for gfx942: 2 of 2 done, 0 left"]
    said.clear()
    runner.measure([(cases[0], "gfx942"), (registry.get_case("triton_vector_add"), "no-such-arch")],
                   progress=said.append)
    assert not [line for line in said if line.startswith("compiled ")]  # nothing compiled: the cache answered


def test_the_gate_passes_the_compile_lines_on_as_they_come(capfd):
    script = ("import sys, json; print('compiled k for gfx950: 1 of 2 done, 1 left', file=sys.stderr, flush=True); "
              "print(json.dumps([{'kernel': 'k'}])); print('2 compiles in 1.0 s', file=sys.stderr)")
    code, out, err = gate._streamed([sys.executable, "-c", script], None, None, "compile abcdef12: ")
    assert code == 0 and out.strip() == '[{"kernel": "k"}]' and "1 of 2 done" in err
    shown = capfd.readouterr().err.splitlines()
    assert shown == ["compile abcdef12: compiled k for gfx950: 1 of 2 done, 1 left",
                     "compile abcdef12: 2 compiles in 1.0 s"]
