"""Execution: numpy kernels, the planner, the runners and Session.

>>> from amanda.exec import Session
>>> Session.__name__
'Session'
"""

from amanda.exec.session import Session

__all__ = ["Session"]
