"""Update compression: sparsifiers, quantisers, lossless coders and AnycostFL's budgeted codec.

The pieces are plain functions over numpy arrays (:mod:`.sparsify`, :mod:`.quantize`, :mod:`.coding`);
:mod:`.codec` composes them into AnycostFL's flexible gradient compression (Sec. III-C) with a bit budget.
"""

from edgefl.compression.codec import (
    LEVEL_GRID,
    MAX_LEVELS,
    BudgetError,
    CodecError,
    Compressed,
    compress,
    decode,
    decode_flat,
    decode_flat_mask,
    decode_with_mask,
    encode_fixed,
    encoded_bits,
    flatten,
    unflatten,
)
from edgefl.compression.coding import CodingError
from edgefl.compression.quantize import QuantizationError
from edgefl.compression.sparsify import SparsifyError

__all__ = [
    "LEVEL_GRID", "MAX_LEVELS", "BudgetError", "CodecError", "CodingError", "Compressed", "QuantizationError",
    "SparsifyError", "compress", "decode", "decode_flat", "decode_flat_mask", "decode_with_mask", "encode_fixed", "encoded_bits", "flatten", "unflatten",
]  # fmt: skip
