"""Matrix products of the ONNX default domain: MatMul, Gemm, Einsum, MatMulInteger."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from amanda.autodiff.node import Node as GradNode
from amanda.autodiff.node import const, rank, shape_of, unbroadcast
from amanda.autodiff.rules_linalg import I64, parse_einsum
from amanda.build import ops
from amanda.build.values import Value
from amanda.exec.kernels.cblas import accumulate, cblas_gemm, rows_times
from amanda.exec.kernels.math_util import as_array, attr_str, wide
from amanda.exec.kernels.registry import kernel
from amanda.exec.kernels.relaid import relaid_if_constant
from amanda.ops import define
from amanda.ops.catalog import FUSED
from amanda.types.node import Node
from amanda.types.rules.linalg import matmul, matmul_shape
from amanda.types.tensor_type import Dim, TensorType

Attrs = Mapping[str, Any]


def _product(fn: Any, *xs: np.ndarray) -> np.ndarray:
    """``fn`` over ``xs`` in a dtype numpy has loops for, cast back to the first input's."""
    dtype = xs[0].dtype
    work = [x.astype(wide(dtype), copy=False) for x in xs]
    return as_array(fn(*work)).astype(dtype, copy=False)


#: A narrow-float weight (float16, bfloat16 ...) widens to float32 this many bytes at a time
SLAB_BYTES = 1 << 24


def _slabbed(a: np.ndarray, b: np.ndarray) -> np.ndarray | None:
    """``a @ b`` for a large narrow-float matrix ``b`` (``a`` of its dtype), widened to float32 one
    slab of ``SLAB_BYTES`` rows at a time and accumulated by BLAS: widening it whole would copy a
    weight twice its size on every call, and a model mapped from its file would hold that copy
    beside the pages it maps. None where that does not apply.

    >>> b = np.arange(12, dtype=np.float16).reshape(4, 3)
    >>> _slabbed(np.ones((2, 4), np.float16), b) is None  # a small weight is widened whole
    True
    """
    if b.ndim != 2 or a.dtype != b.dtype or wide(b.dtype) == b.dtype or 2 * b.nbytes <= SLAB_BYTES:
        return None
    k, n = b.shape
    gemm = cblas_gemm(np.dtype(np.float32))
    rows = a.reshape(-1, k).astype(np.float32)
    out = np.zeros((rows.shape[0], n), np.float32)
    step = max(1, SLAB_BYTES // (4 * n))
    for i in range(0, k, step):
        slab = b[i:i + step].astype(np.float32)
        if gemm is not None:
            accumulate(gemm, rows[:, i:i + step], slab, out, 1.0)
        else:  # pragma: no cover - a BLAS amanda cannot call
            out += rows[:, i:i + step] @ slab
    return out.astype(b.dtype).reshape(*a.shape[:-1], n)


def _matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    # (..., m, k) @ (k, n) is one (prod(...) * m, k) @ (k, n) GEMM: numpy would loop over
    # the batch, and one large GEMM is markedly faster than many small ones; a non-contiguous
    # ``a`` (a transposed view) is copied first: one pass, where numpy's fallback would run
    # one small product per batch row
    if b.ndim == 2 and a.ndim > 2:
        rows = np.ascontiguousarray(a, like=a).reshape(-1, a.shape[-1])  # like=: a GPU array stays one
        return np.matmul(rows, b).reshape(*a.shape[:-1], b.shape[-1])
    return np.matmul(a, b)


def _dense(a: np.ndarray, b: np.ndarray, c: np.ndarray | None) -> np.ndarray | None:
    """``a @ b + c`` for a float dense layer (2-D ``a`` and ``b``, a row ``c``) with fewer rows than
    outputs, computed as ``(b.T @ a.T).T``: the result is the transposed view of an
    ``(N, M)`` array, which the next such layer reads as its ``a.T`` without a copy.

    OpenBLAS runs the MLP's (64, 784) @ (784, 512) about 10% faster in that orientation
    (two threads: 483 -> 435 µs for the three layers), as onnxruntime's MLAS-sized gap asks.
    None where the layer does not fit, or for another library's arrays (the caller computes it
    as usual)."""
    m, n = a.shape[0], b.shape[1]
    if (m >= n or type(a) is not np.ndarray or type(b) is not np.ndarray or a.dtype != b.dtype or a.dtype.char not in "fd"
            or (c is not None and (c.dtype != a.dtype or c.shape not in ((n,), (1, n))))):
        return None
    # a plan's constant weights only (a transposed weight, Gemm's transB, needs no copy): a
    # variable's value is new after each training step, and copying it per call cost the MLP's
    # training step 0.8 ms; whether a product runs transposed never depends on earlier calls,
    # as the two orientations differ in the last bits
    bt = b.T if b.flags.f_contiguous and not b.flags.writeable else (
        relaid_if_constant(b, "T", lambda w: np.ascontiguousarray(w.T)) if b.flags.c_contiguous else None)
    if bt is None:
        return None
    out = np.matmul(bt, a.T)
    if c is not None:
        out += c.reshape(n, 1)
    return out.T


@kernel("MatMul", since=1, heavy=True)
def matmul_kernel(attrs: Attrs, a: np.ndarray, b: np.ndarray) -> tuple:
    """ONNX MatMul: numpy ``matmul`` semantics, batch dimensions broadcast."""
    dense = _dense(a, b, None) if a.ndim == b.ndim == 2 else None
    if dense is None:
        dense = _slabbed(a, b)
    return (_product(_matmul, a, b) if dense is None else dense,)


def _swap_last(v: Value, r: int) -> Value:
    return ops.Transpose(v, perm=[*range(r - 2), r - 1, r - 2])


def matmul_vjp(n: GradNode) -> list:
    """MatMul (numpy semantics, 1-D operands included): ``g @ b^T`` and ``a^T @ g``; for a
    matrix ``b`` applied to a batch (``a`` of rank > 2), ``b``'s gradient is one ``Gemm`` of the
    rows flattened (not a product per batch entry summed by a ``ReduceSum``)."""
    a, b = n.given(0, 1)
    g = n.grad()
    ra, rb = rank(a, n), rank(b, n)
    if ra == 1 and rb == 1:
        return [ops.Mul(g, b) if n.need(0) else None, ops.Mul(g, a) if n.need(1) else None]
    if ra == 2 and rb == 2:  # Gemm transposes inside the product: no copies of the operands
        return [ops.Gemm(g, b, transB=1) if n.need(0) else None, ops.Gemm(a, g, transA=1) if n.need(1) else None]
    a2 = ops.Unsqueeze(a, np.array([0], np.int64)) if ra == 1 else a
    b2 = ops.Unsqueeze(b, np.array([1], np.int64)) if rb == 1 else b
    g2 = ops.Unsqueeze(g, np.array([-2 if ra == 1 else -1], np.int64)) if 1 in (ra, rb) else g
    out: list = [None, None]
    if n.need(0):
        da = ops.MatMul(g2, _swap_last(b2, max(rb, 2)))
        out[0] = unbroadcast(ops.Squeeze(da, np.array([-2], np.int64)) if ra == 1 else da, a)
    if n.need(1) and rb == 2 and ra > 2:  # a weight matrix applied to every row: one GEMM over all rows
        out[1] = ops.Gemm(ops.Flatten(a, axis=ra - 1), ops.Flatten(g, axis=ra - 1), transA=1)
    elif n.need(1):
        db = ops.MatMul(_swap_last(a2, max(ra, 2)), g2)
        out[1] = unbroadcast(ops.Squeeze(db, np.array([-1], np.int64)) if rb == 1 else db, b)
    return out


define("MatMul", type_rule=matmul, vjp=matmul_vjp)


@kernel("MatMulAdd", family=FUSED, heavy=True)
def matmul_add_kernel(attrs: Attrs, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> tuple:
    """amanda's fused ``Add(MatMul(a, b), c)`` (a Linear layer: ``b`` a constant matrix, ``c`` a
    bias row), made by :func:`amanda.passes.fuse.fuse_matmul_add_internal` for a Session's plans.

    The bias is written first and BLAS adds the product into it, so the Add costs neither a
    dispatch nor a pass of its own; a 2-D product with fewer rows than outputs runs transposed
    (see ``_dense``). Anything else computes exactly what the two ops would."""
    n = b.shape[-1]
    if (b.ndim == 2 and a.ndim >= 2 and c.ndim <= 1 and c.size in (1, n) and a.dtype == b.dtype == c.dtype
            and a.dtype.char in "fd"):
        row = c.reshape(-1)
        if a.ndim > 2:
            rows = np.ascontiguousarray(a).reshape(-1, a.shape[-1])
            return (rows_times(rows, b, row).reshape(*a.shape[:-1], n),)
        dense = _dense(a, b, row)
        if dense is None:  # BLAS reads a transposed (F-ordered) ``a`` as it is: no copy
            dense = np.matmul(a, b)
            dense += row
        return (dense,)
    y = _product(_matmul, a, b)
    return (as_array(np.add(y, c.astype(y.dtype, copy=False))),)


# its bias row broadcasts into the product: MatMul's type rule
define("MatMulAdd", family=FUSED, type_rule=matmul,
       gradient_gap="a fused op made by optimize: differentiate before optimising")


@kernel("Gemm", since=1, heavy=True)
def gemm_kernel(attrs: Attrs, a: np.ndarray, b: np.ndarray, c: np.ndarray | None = None) -> tuple:
    """ONNX Gemm: ``alpha * A' @ B' + beta * C`` with optional transposes; C broadcasts."""
    alpha, beta = float(attrs.get("alpha", 1.0)), float(attrs.get("beta", 1.0))
    if alpha == beta == 1.0 and a.ndim == b.ndim == 2 and not int(attrs.get("transA", 0)):
        dense = _dense(a, b.T if int(attrs.get("transB", 0)) else b, c)
        if dense is not None:
            return (dense,)
    wa = a.astype(wide(a.dtype), copy=False)
    wb = b.astype(wide(a.dtype), copy=False)
    if int(attrs.get("transA", 0)):
        wa = wa.T
    if int(attrs.get("transB", 0)):
        wb = wb.T
    out = wa @ wb
    # multiply only when needed so integer Gemm stays exact
    if alpha != 1.0:
        out = alpha * out
    if c is not None:
        wc = c.astype(out.dtype, copy=False)
        out = out + (beta * wc if beta != 1.0 else wc)
    return (as_array(out).astype(a.dtype, copy=False),)


def gemm(node: Node) -> list:
    """``alpha·A'·B' + beta·C``: [M, N], with C broadcasting to it."""
    a, b = node.shape(0), node.shape(1)
    if node.dtype(0) and node.dtype(1) and node.dtype(0) != node.dtype(1):
        raise node.fail(f"B of dtype {node.dtype(0)}", str(node.dtype(1)))
    if a is None or b is None:
        return [TensorType(node.dtype(0), (None, None))]
    for name, s in (("A", a), ("B", b)):
        if len(s) != 2:
            raise node.fail(f"{name} of rank 2", f"rank {len(s)}")
    if node.attr("transA", 0):
        a = a[::-1]
    if node.attr("transB", 0):
        b = b[::-1]
    node.same(a[1], b[0], "the inner dims of Gemm")
    out = (a[0], b[1])
    c = node.shape(2)
    if c is not None:
        node.broadcast(out, c)
    return [TensorType(node.dtype(0), out)]


def gemm_vjp(n: GradNode) -> list:
    """Gemm ``alpha * A' @ B' + beta * C``: the products transposed back as the op transposed."""
    a, b = n.inputs[:2]
    g = n.grad()
    alpha, beta = float(n.attr("alpha", 1.0)), float(n.attr("beta", 1.0))
    ta, tb = int(n.attr("transA", 0)), int(n.attr("transB", 0))
    out: list = [None] * len(n.inputs)
    if n.need(0):  # dA' = g @ B'^T, and A = A'^T when transposed
        out[0] = ops.Gemm(b, g, alpha=alpha, transA=tb, transB=1) if ta else ops.Gemm(g, b, alpha=alpha, transB=1 - tb)
    if n.need(1):  # dB' = A'^T @ g
        out[1] = ops.Gemm(g, a, alpha=alpha, transA=1, transB=ta) if tb else ops.Gemm(a, g, alpha=alpha, transA=1 - ta)
    if n.need(2):
        scaled = g if beta == 1.0 else ops.Mul(g, const(beta, g))
        out[2] = unbroadcast(scaled, n.inputs[2])  # type: ignore[arg-type]
    return out


define("Gemm", type_rule=gemm, vjp=gemm_vjp)


@kernel("Einsum", since=12, heavy=True)
def einsum_kernel(attrs: Attrs, *xs: np.ndarray) -> tuple:
    """ONNX Einsum: numpy ``einsum`` with the ``equation`` attribute."""
    equation = attr_str(attrs, "equation", "").replace(" ", "")
    return (_product(lambda *w: np.einsum(equation, *w), *xs),)


def einsum(node: Node) -> list:
    """Dims named by the equation's letters (and ``...``); a letter's dims must agree."""
    equation = str(node.attr("equation", "")).replace(" ", "")
    lhs, arrow, rhs = equation.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(node.types):
        raise node.fail(f"{len(terms)} inputs for {equation!r}", str(len(node.types)))
    letters: dict[str, Dim] = {}
    ellipsis: Any = ()
    for i, term in enumerate(terms):
        shape = node.shape(i)
        if shape is None:
            return [TensorType(node.dtype(0), None)]
        named = term.replace("...", "")
        extra = len(shape) - len(named)
        if extra < 0 or (extra and "..." not in term):
            raise node.fail(f"input {i} of rank {len(named)} for {term!r}", f"rank {len(shape)}")
        head = term.index("...") if "..." in term else len(named)
        ellipsis = node.broadcast(ellipsis, shape[head:head + extra])
        dims = shape[:head] + shape[head + extra:]
        for letter, d in zip(named, dims):
            letters[letter] = node.same(letters[letter], d, f"dims of {letter!r}") if letter in letters else d
    if not arrow:
        counts = lhs.replace("...", "").replace(",", "")
        rhs = ("..." if "..." in lhs else "") + "".join(sorted(c for c in set(counts) if counts.count(c) == 1))
    out: list[Dim] = []
    parts = rhs.split("...")
    for k, part in enumerate(parts):
        if k:
            out.extend(ellipsis)
        out.extend(letters.get(c) for c in part)
    return [TensorType(node.dtype(0), out)]


def _spelled(term: str) -> str:
    return term.replace(".", "...")


def _einsum_operand_grad(n: GradNode, g: Any, values: list, terms: list, out: str, k: int, equation: str) -> Any:
    """The gradient of Einsum operand ``k``: the output gradient contracted with the other
    operands, expanded over the letters only operand ``k`` had (summed away in the output)."""
    x, term = values[k], terms[k]
    letters = [c for c in term if c != "."]
    if len(set(letters)) != len(letters):
        raise n.fail("operands without repeated subscripts", f"{term!r} in {equation!r}")
    others = [(v, t) for i, (v, t) in enumerate(zip(values, terms)) if i != k]
    present = set(out) | {c for _, t in others for c in t}
    target = "".join(c for c in term if c in present)
    eq = ",".join(_spelled(t) for t in [out] + [t for _, t in others]) + "->" + _spelled(target)
    gk = ops.Einsum(g, *[v for v, _ in others], equation=eq)
    missing = [c for c in term if c not in present]
    if missing:
        r = rank(x, n)
        ell = r - len(letters)
        where = [i if "." not in term or i < term.index(".") else i - 1 + ell
                 for i, c in enumerate(term) if c in missing]
        gk = ops.Expand(ops.Unsqueeze(gk, np.array(where, I64)), shape_of(x))
    return unbroadcast(gk, x)


def einsum_vjp(n: GradNode) -> list:
    """Einsum: per operand, an Einsum of the gradient and the other operands (module doc)."""
    values = [n.given(i) for i in range(len(n.inputs))]
    equation = n.attr("equation")
    equation = equation.decode() if isinstance(equation, bytes) else str(equation)
    try:
        terms, out = parse_einsum(equation, len(values))
    except ValueError as exc:
        raise n.fail("an equation with one term per input", str(exc)) from None
    g = n.grad()
    return [_einsum_operand_grad(n, g, values, terms, out, k, equation) if n.need(k) else None
            for k in range(len(values))]


define("Einsum", type_rule=einsum, vjp=einsum_vjp)


def _zero_point(zp: np.ndarray | None, row_wise: bool) -> Any:
    if zp is None:
        return 0
    zp = np.asarray(zp).astype(np.int32)
    # a 1-D zero point of A is per row (the M axis): make it a column
    return zp.reshape(-1, 1) if row_wise and zp.ndim == 1 else zp


@kernel("MatMulInteger", since=10, heavy=True)
def matmul_integer_kernel(
    attrs: Attrs,
    a: np.ndarray,
    b: np.ndarray,
    a_zero_point: np.ndarray | None = None,
    b_zero_point: np.ndarray | None = None,
) -> tuple:
    """ONNX MatMulInteger: 8-bit operands minus zero points, multiplied into int32."""
    wa = a.astype(np.int32) - _zero_point(a_zero_point, row_wise=True)
    wb = b.astype(np.int32) - _zero_point(b_zero_point, row_wise=False)
    return (as_array(np.matmul(wa, wb)).astype(np.int32, copy=False),)


def matmul_integer(node: Node) -> list:
    """An int32 matrix product."""
    return [TensorType("int32", matmul_shape(node, node.shape(0), node.shape(1)))]


define("MatMulInteger", type_rule=matmul_integer, no_gradient="quantised (integer) data")
