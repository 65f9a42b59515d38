"""TensorFlow files <-> containers, without TensorFlow (needs ``protobuf``: the ``tensorflow``
extra). See ``docs/tensorflow.md``.

``amanda.load`` reads a ``.pb`` (binary ``GraphDef``), a ``.pbtxt`` (text ``GraphDef``) and a
SavedModel folder (its ``saved_model.pb``, one signature, and the variables' values from its
checkpoint) through :func:`load_graphdef` and :func:`load_saved_model`; ``amanda.dump(g,
"x.pb")`` (or ``.pbtxt``) writes a ``GraphDef`` with :func:`dump_graphdef`. :func:`endpoint`
turns a TensorFlow tensor name (``dense/Relu:0``) into the endpoint that carries it, and
:func:`op_path` a node name into the path of its op.

>>> import os, tempfile, amanda
>>> from amanda.io.tensorflow.protos import message
>>> gd = message("tensorflow.GraphDef")()
>>> gd.node.add(name="x", op="Placeholder").attr["dtype"].type = 1  # DT_FLOAT
>>> gd.node.add(name="dense/Relu", op="Relu", input=["x"]).attr["T"].type = 1
>>> path = os.path.join(tempfile.mkdtemp(), "g.pb")
>>> with open(path, "wb") as f:
...     _ = f.write(gd.SerializeToString())
>>> g = amanda.load(path)
>>> g.select("$..[?type=='Relu']").paths
(('dense', 'Relu'),)
>>> amanda.load(dump_graphdef(g, path)) == g
True
"""

from __future__ import annotations

from amanda.io.tensorflow.files import dump_graphdef, load_graphdef
from amanda.io.tensorflow.names import endpoint, op_path
from amanda.io.tensorflow.saved_model import load_saved_model

__all__ = ["dump_graphdef", "endpoint", "load_graphdef", "load_saved_model", "op_path"]
