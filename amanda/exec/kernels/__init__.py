"""Every kernel module; importing this package registers all kernels."""
from amanda.exec.kernels import (
    conv,  # noqa: F401
    conv_transpose,  # noqa: F401
    recurrent,  # noqa: F401
)
