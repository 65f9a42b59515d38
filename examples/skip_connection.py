"""A ResNet-style skip connection around an existing chain of three layers, without
modifying the chain: a wrapper deletes one inner edge with a tombstone and adds the sum."""

import amanda
from amanda import op


def main() -> None:
    layers = [op("Dense", f"L{i}", ["x"], ["y"], {"units": 64}) for i in (1, 2, 3)]
    body = amanda.chain(*layers, inputs=["image"], outputs=["features"], name="body")

    resnet = (
        amanda.edit(body)
        .remove_edge("body/L2:y", "body/L3:x")          # a tombstone for the inner edge
        .add(op("Add", "skip", ["a", "b"], ["y"]))
        .connect("body/L1:y", "skip:a")
        .connect("body/L2:y", "skip:b")
        .connect("skip:y", "body/L3:x")
        .build(name="resnet")
    )
    assert resnet.child("body") is body, "the wrapped chain is the very same object"

    print("original dataflow:")
    for edge in amanda.flatten(body).edges:
        print(f"  {edge.src} -> {edge.dst}")
    print("with the skip connection:")
    for edge in amanda.flatten(resnet).edges:
        print(f"  {edge.src} -> {edge.dst}")
    print("run order:", [o.name for o in resnet.sorted()])

    folded = amanda.consolidate(resnet)
    print("consolidated into one tree:", [c.name for c in folded.children], "tombstones:", len(folded.tombstones))
    print(amanda.dumps(resnet)[:400], "...")


if __name__ == "__main__":
    main()
