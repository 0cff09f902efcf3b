"""Update compression: sparsifiers, quantisers, lossless coders and AnycostFL's budgeted codec.

The pieces are plain functions over numpy arrays (:mod:`.sparsify`, :mod:`.quantize`, :mod:`.coding`);
:mod:`.codec` composes them into AnycostFL's flexible gradient compression (Sec. III-C) with a bit budget.
"""

from edgefl.compression import codec
from edgefl.compression.codec import *  # noqa: F403 - the codec's public names, codec.__all__
from edgefl.compression.coding import CodingError
from edgefl.compression.quantize import QuantizationError
from edgefl.compression.sparsify import SparsifyError

__all__ = [*codec.__all__, "CodingError", "QuantizationError", "SparsifyError"]
