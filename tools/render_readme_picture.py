"""Draw the README's skip-connection picture: docs/skip_connection.svg (needs Graphviz's dot).

    python tools/render_readme_picture.py
"""

from pathlib import Path

import amanda


def skip_connection() -> amanda.Container:
    """The README's example: a chain of three layers and an Add skip connection, by edit."""
    body = amanda.chain(
        amanda.op("MatMul", "L1", ["x"], [amanda.Port("y", attrs={"dtype": "float32", "shape": ("batch", 64)})]),
        amanda.op("Relu", "L2", ["x"], [amanda.Port("y", attrs={"dtype": "float32", "shape": ("batch", 64)})]),
        amanda.op("Relu", "L3", ["x"], ["y"]),
        inputs=["x"], outputs=["y"], name="body",
    )
    return (amanda.edit(body)
            .remove_edge("body/L2:y", "body/L3:x")
            .add(amanda.op("Add", "skip", ["a", "b"], ["y"]))
            .connect("body/L1:y", "skip:a").connect("body/L2:y", "skip:b").connect("skip:y", "body/L3:x")
            .build(name="resnet"))


if __name__ == "__main__":
    target = Path(__file__).resolve().parent.parent / "docs" / "skip_connection.svg"
    amanda.render(skip_connection(), target)
    print(f"wrote {target}")
