"""Querying a model: the four example queries of docs/query.md, each one selector, then a query
handed to a pure transform, and what a mistake in a selector looks like."""

import amanda
from amanda import SELF, Container, op
from amanda.containers import with_attrs
from amanda.query import select


def rnn_cell(name: str, probe_in_inference: bool) -> Container:
    """An RNN cell marked `rnn_cell: true`, with a debug probe on its activation."""
    edges = [
        (f"{name}:x", "x_proj:a"), (f"{name}:h", "h_proj:a"), ("x_proj:y", "add:a"), ("h_proj:y", "add:b"),
        ("add:y", "act:x"), ("act:y", f"{name}:y"), ("act:y", "probe:x"),
    ]
    if probe_in_inference:  # the cell's own inference port waits for the probe
        edges.append(("probe:-1", (SELF, "inference")))
    return Container(
        "LSTMCell", name, inputs=["x", "h"], outputs=["y"], controls=["inference"],
        children=[
            op("Dot", "x_proj", ["a"], ["y"]), op("Dot", "h_proj", ["a"], ["y"]), op("Add", "add", ["a", "b"], ["y"]),
            op("Tanh", "act", ["x"], ["y"]), op("Print", "probe", ["x"], [], attrs={"debug": True}),
        ],
        edges=edges, attrs={"rnn_cell": True},
    )


def build_model() -> Container:
    """Two stacked RNN cells, a dense layer, debug prints for inference and for training."""
    return Container(
        "Model", "model", inputs=["x"], outputs=["y"], controls=["train", "inference"],
        children=[
            op("Const", "w_init", outputs=["w"], attrs={"initializer": True}),
            op("Const", "h0", outputs=["h"], attrs={"initializer": True}),
            op("Gather", "embed", ["ids"], ["y"]),
            rnn_cell("rnn1", probe_in_inference=False),
            rnn_cell("rnn2", probe_in_inference=True),
            op("Dot", "dense/MatMul", ["a", "b"], ["y"]),
            op("Softmax", "softmax", ["x"], ["y"]),
            op("Print", "print_logits", ["x"], [], attrs={"debug": True}),
            op("Print", "grad_check", ["x"], [], attrs={"debug": True}),
        ],
        edges=[
            ("model:x", "embed:ids"), ("embed:y", "rnn1:x"), ("h0:h", "rnn1:h"), ("rnn1:y", "rnn2:x"),
            ("h0:h", "rnn2:h"), ("rnn2:y", "dense/MatMul:a"), ("w_init:w", "dense/MatMul:b"),
            ("dense/MatMul:y", "softmax:x"), ("softmax:y", "model:y"), ("dense/MatMul:y", "print_logits:x"),
            ("softmax:y", "grad_check:x"),
            ("print_logits:-1", (SELF, "inference")), ("grad_check:-1", (SELF, "train")),
        ],
        attrs={"namespace": "amanda/onnx/17"},
    )


QUERIES = {
    "containers marked rnn_cell": "$..[?own_attrs.rnn_cell == `true`]",
    "ops inside them (inherited)": "$..[?is_op && attrs.rnn_cell == `true`]",
    "all Dot ops": "$..[?is_op && type == 'Dot']",
    "debug ops in inference": "$..[?is_op && attrs.debug && in_computation('inference')]",
    "top-level non-initializers": "$[?is_op && !(attrs.initializer)]",
}


def show(title: str, selection: amanda.query.Selection) -> None:
    print(f"{title}:")
    for path, container in selection:
        print(f"    {'/'.join(path):24} {container.type}")


def main() -> None:
    model = build_model()
    for title, selector in QUERIES.items():
        show(f"{title}  {selector}", select(model, selector))

    # a selection is a set of paths: query further from it, or hand it to a transform
    cells = model.select("$..[?own_attrs.rnn_cell]")
    show("Dot ops under the cells", cells.select("..[?type == 'Dot']"))
    marked = with_attrs(model, cells.select("..[?type == 'Dot']"), fuse_candidate=True)
    show("marked in the new model", select(marked, "$..[?own_attrs.fuse_candidate]"))
    print("original untouched:", len(select(model, "$..[?own_attrs.fuse_candidate]")) == 0)

    # mistakes point at the selector
    for bad in ("$..[?type = 'Dot']", "$..[?is_op && shape_of(name)]", "$.rnn1[0"):
        try:
            select(model, bad)
        except amanda.QueryError as error:
            print(error)


if __name__ == "__main__":
    main()
