"""Every kernel module; importing this package registers all kernels."""
from amanda.exec.kernels import conv  # noqa: F401
from amanda.exec.kernels import elementwise  # noqa: F401
from amanda.exec.kernels import logic  # noqa: F401
from amanda.exec.kernels import activations  # noqa: F401
from amanda.exec.kernels import softmax  # noqa: F401
from amanda.exec.kernels import reduce  # noqa: F401
from amanda.exec.kernels import linalg  # noqa: F401
from amanda.exec.kernels import normalization  # noqa: F401
from amanda.exec.kernels import cast  # noqa: F401
from amanda.exec.kernels import identity  # noqa: F401
from amanda.exec.kernels import pool  # noqa: F401
from amanda.exec.kernels import shape  # noqa: F401
from amanda.exec.kernels import slicing  # noqa: F401
from amanda.exec.kernels import indexing  # noqa: F401
from amanda.exec.kernels import construct  # noqa: F401
from amanda.exec.kernels import sorting  # noqa: F401
from amanda.exec.kernels import resize  # noqa: F401
