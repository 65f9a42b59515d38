"""Random DAGs of Neg/Add ops for the nesting tests (tests/io/test_nest*.py)."""

from __future__ import annotations

from hypothesis import strategies as st

import amanda


def draw_dag(draw: st.DrawFn, count: int) -> tuple[list, list, list]:
    """``count`` Neg/Add ops over the graph input ``x``, each reading earlier values (output
    ``Y`` carries ``v<i>``): the ops, the edges into them, and every value (``(SELF, "x")``,
    then ``(op name, "Y")`` per op)."""
    ops, edges, values = [], [], [(amanda.SELF, "x")]
    for i in range(count):
        kind, ins = ("Add", ["A", "B"]) if draw(st.booleans()) else ("Neg", ["X"])
        name = f"op{i}"
        ops.append(amanda.op(kind, name, ins, [amanda.Port("Y", attrs={"onnx_name": f"v{i}"})]))
        for port in ins:
            src = draw(st.sampled_from(values))
            edges.append(amanda.Edge(src if src[0] is amanda.SELF else ((src[0],), src[1]), ((name,), port)))
        values.append((name, "Y"))
    return ops, edges, values
