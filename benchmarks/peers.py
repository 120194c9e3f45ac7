"""The peers a workload is compared with: NumPy, PyTorch and ONNX Runtime, each given the same
inputs as our kernel and checked against the NumPy reference before it is timed.

The package's report compares with the same peers, so they are defined once, in
``tensortune.cli.peers``: ``{peer name: zero-argument callable}``, omitting peers that do not
implement the op (NumPy has no conv) or are not installed.
"""

from tensortune.cli.peers import Peer, peers_for

__all__ = ["Peer", "peers_for"]
