"""Update compression: the codecs of the compressing methods, in torch on the device that trained the update.

- :mod:`.ops`: each shared operation once (top-k ranking, stochastic rounding, Rice and Huffman sizes from
  statistics, A2's nearest point and dither, the budget search over one knob).
- :mod:`.coded`: :class:`~.coded.Coded`, what an encoded update is (sent positions, dequantised values, exact
  bits) and how the server adds it in.
- The codecs, each with ``encode`` (a fixed setting), a budgeted fit and the byte-exact oracle ``to_bytes`` /
  ``from_bytes``: :mod:`.fgc` (AnycostFL's FGC, QSGD, FedHQ; format 0xA7), :mod:`.ternary` (STC; 0xB7),
  :mod:`.vq` (UVeQFed; 0xC7).
- :mod:`.wire`: the plain bit writer and reader the oracles use (``docs/wire_formats.md``).
"""

from edgefl.compression.wire import WireError

__all__ = ["WireError"]
