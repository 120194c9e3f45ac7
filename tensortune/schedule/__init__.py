"""Schedule primitives and their replayable trace.

``Schedule`` holds the primitives; ``Step`` and its subclasses (``trace``) are the trace as data;
``Root``, ``Inline`` and ``At`` (``stage``) are the places a stage can be computed.
"""

from .schedule import Schedule
from .stage import At, Attach, Inline, Root
from .trace import Step

__all__ = ["At", "Attach", "Inline", "Root", "Schedule", "Step"]
