"""Write amanda/namespaces/data/onnx_schemas.json.gz from the installed onnx.defs.

The file is the ONNX vocabulary amanda uses when onnx is not installed. Run from the repository
root after upgrading onnx:

    python tools/gen_onnx_vocabulary.py            # (re)write the file
    python tools/gen_onnx_vocabulary.py --check    # exit 1 if the file is out of date
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from amanda.namespaces.onnx_vocab import (
    DATA_FILE,
    vocabulary_from_file,
    vocabulary_from_onnx,
    vocabulary_to_bytes,
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=DATA_FILE, help="file to write")
    parser.add_argument("--check", action="store_true",
                        help="only check that the file matches onnx.defs")
    args = parser.parse_args(argv)
    vocabulary = vocabulary_from_onnx()
    data = vocabulary_to_bytes(vocabulary)
    if args.check:
        current = args.output.read_bytes() if args.output.exists() else b""
        if current != data:
            print(f"{args.output} is out of date for onnx {vocabulary.onnx_version}; "
                  f"run python tools/gen_onnx_vocabulary.py", file=sys.stderr)
            return 1
        print(f"{args.output} is up to date (onnx {vocabulary.onnx_version})")
        return 0
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_bytes(data)
    back = vocabulary_from_file(args.output)
    if back.schemas != vocabulary.schemas or dict(back.domains) != dict(vocabulary.domains):
        print("round trip through the file lost information", file=sys.stderr)
        return 1
    print(f"wrote {args.output}: {len(vocabulary.schemas)} schemas, "
          f"{len(data)} bytes, onnx {vocabulary.onnx_version}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
