"""Running untrusted student code: isolation levels, limits, and the parent/child protocol."""
from .backends import SandboxUnavailable
from .limits import Limits
from .session import CallResult, LoadResult, SandboxSession, StudentError
from .wall import strict_problems

__all__ = ["CallResult", "Limits", "LoadResult", "SandboxUnavailable", "SandboxSession", "StudentError",
           "strict_problems"]
