"""A small CNN with BatchNorm composed from layers; a skip connection added non-destructively
with `edit`; a few training-phase runs (which update the running statistics); inference;
export to ONNX and a check against onnxruntime."""

import numpy as np

import amanda
from amanda import layers
from amanda.io.onnx import to_onnx


def main() -> None:
    body = amanda.chain(
        layers.Conv(3, 8, 3, padding="same", name="conv1"), layers.BatchNorm(8, name="bn1"), layers.relu(),
        layers.Conv(8, 8, 3, padding="same", name="conv2"), layers.BatchNorm(8, name="bn2"), layers.relu(),
        layers.MaxPool(2), layers.GlobalAvgPool(), layers.Dense(8, 10, name="classifier"),
        name="body")
    image = amanda.Input("image", "float32", ("batch", 3, 16, 16))
    cnn = layers.seeded(amanda.model([image], {"logits": body(image)}, name="cnn"), seed=0)
    print(amanda.summary(cnn, depth=2))

    # a residual connection around the second block, leaving `cnn` untouched
    resnet = (
        amanda.edit(cnn)
        .remove_edge("cnn/body/bn2:y", "cnn/body/relu_1:x")
        .add(amanda.op("Add", "skip", ["A", "B"], ["C"], {"namespace": "amanda/onnx/17"}))
        .connect("cnn/body/relu:y", "skip:A")
        .connect("cnn/body/bn2:y", "skip:B")
        .connect("skip:C", "cnn/body/relu_1:x")
        .build(name="resnet"))
    assert resnet.child("cnn") is cnn and resnet.control_names == ("train",)

    rng = np.random.default_rng(0)
    batch = rng.standard_normal((4, 3, 16, 16)).astype(np.float32)
    with amanda.Session(resnet) as session:
        for _ in range(3):  # fetching "train" runs every BatchNorm's update of its running statistics
            session.run(["logits", "train"], {"image": batch}, phase="train")
        logits = session.run(["logits"], {"image": batch}, phase="inference")[0]
        frozen = layers.freeze(resnet, session.state)  # running statistics become initializers
    print("inference logits:", logits.shape)

    import onnxruntime as ort

    proto = to_onnx(frozen)
    runtime = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = runtime.run(None, {"image": batch})[0]
    np.testing.assert_allclose(logits, expected, rtol=1e-4, atol=1e-5)
    print(f"onnxruntime agrees ({len(proto.graph.node)} ONNX nodes, "
          f"max difference {np.abs(logits - expected).max():.1e})")


if __name__ == "__main__":
    main()
