"""Train a small CNN on scikit-learn's 8x8 digits (1,797 images shipped with the package).

The CNN is built from layers, gets a skip connection added non-destructively with `edit`, and
is trained with Adam by `amanda.optim.fit` (seeded shuffling, held-out accuracy after each
epoch, a progress bar on a terminal). The trained inference model (`history.model()`) is
exported to ONNX, and onnxruntime gives the same predictions.
Needs the `examples` extra (scikit-learn).
"""

import time

import numpy as np
from sklearn.datasets import load_digits

import amanda
from amanda import layers, ops
from amanda.io.onnx import to_onnx
from amanda.optim import Adam, fit, predict

EPOCHS, BATCH = 15, 32


def network() -> amanda.Container:
    body = amanda.chain(
        layers.Conv(1, 16, 3, padding="same", name="conv1"), layers.BatchNorm(16, name="bn1"), layers.relu(),
        layers.Conv(16, 16, 3, padding="same", name="conv2"), layers.BatchNorm(16, name="bn2"), layers.relu(),
        layers.MaxPool(2), layers.Conv(16, 32, 3, padding="same", name="conv3", activation="relu"),
        layers.GlobalAvgPool(), layers.Dense(32, 10, name="classifier"),
        name="body")
    image = amanda.Input("image", "float32", ("batch", 1, 8, 8))
    labels = amanda.Input("labels", "int64", ("batch",))
    logits = body(image)
    loss = ops.SoftmaxCrossEntropyLoss(logits, labels, name="xent")[0]
    cnn = layers.seeded(amanda.model([image, labels], {"logits": logits, "loss": loss}, name="cnn"), seed=0)
    # a residual connection around the second block, leaving `cnn` untouched
    return (amanda.edit(cnn)
            .remove_edge("cnn/body/bn2:y", "cnn/body/relu_1:x")
            .add(amanda.op("Add", "skip", ["A", "B"], ["C"], {"namespace": "amanda/onnx/17"}))
            .connect("cnn/body/relu:y", "skip:A")
            .connect("cnn/body/bn2:y", "skip:B")
            .connect("skip:C", "cnn/body/relu_1:x")
            .build(name="resnet"))


def main() -> None:
    start = time.perf_counter()
    digits = load_digits()
    images = (digits.images / 16.0).astype(np.float32)[:, None]
    labels = digits.target.astype(np.int64)
    order = np.random.default_rng(0).permutation(len(labels))
    held, train = order[: len(order) // 4], order[len(order) // 4:]
    history = fit(network(), images[train], labels[train], optimizer=Adam(lr=0.005), epochs=EPOCHS,
                  batch_size=BATCH, seed=1, validation_data=(images[held], labels[held]), metrics=["accuracy"])
    accuracy = history.history["val_accuracy"][-1]
    inference = history.model()
    logits = predict(inference, images[held])
    print(f"held-out accuracy {accuracy:.4f} on {len(held)} images after {time.perf_counter() - start:.1f} s")
    assert accuracy >= 0.97, accuracy

    import onnxruntime as ort

    runtime = ort.InferenceSession(to_onnx(inference).SerializeToString(), providers=["CPUExecutionProvider"])
    theirs = runtime.run(["logits"], {"image": images[held], "labels": labels[held]})[0]
    assert (theirs.argmax(axis=1) == logits.argmax(axis=1)).all()
    print(f"onnxruntime gives the same {len(held)} predictions (max logit difference {np.abs(theirs - logits).max():.1e})")


if __name__ == "__main__":
    main()
