"""Uploads lost to packet errors (``[channel.packet_errors]``, Chen et al., TWC 2021): which attempts fail.

An upload with packet error rate q (:meth:`edgefl.fleet.links.Radio.packet_error_rate`, eq. (9)) fails each
attempt independently with probability q (the channel is one block for the round, so every attempt sees the same
q); a failed attempt is sent again at once, up to ``retransmissions`` times. Device d's attempts in round r draw
uniforms u_1, u_2, ... from its own stream (``packet_errors``, r, d) (asynchronous FL: the dispatch's number in
place of r, since a device may take two jobs in one server update): attempt k fails when ``u_k < q``. No other
consumer draws from that stream, so turning packet errors on moves no other random number of the run, and the
first k attempts come out the same whatever ``retransmissions`` is.
"""

from __future__ import annotations

import numpy as np

from edgefl.seeding import Streams

__all__ = ["STREAM", "upload_attempts"]

STREAM = "packet_errors"
"""The name of the devices' packet-error streams (:class:`edgefl.seeding.Streams`)."""


def upload_attempts(
    q: np.ndarray, devices: np.ndarray, *, key: int, retransmissions: int, streams: Streams
) -> tuple[np.ndarray, np.ndarray]:
    """How many times each upload is sent and whether it is lost, shape (m,) each.

    ``q``: each upload's packet error rate, in [0, 1]; ``devices``: their device ids, shape (m,); ``key``: the
    round (the asynchronous dispatch's tag), which with the device keys each stream; each upload is
    sent until an attempt gets through or ``retransmissions + 1`` attempts have failed (then it is lost). Returns
    (attempts, int; lost, bool).
    """
    tries = retransmissions + 1
    attempts = np.full(devices.size, tries, dtype=np.int64)
    lost = np.zeros(devices.size, dtype=bool)
    for i, (d, q_i) in enumerate(zip(devices.tolist(), np.asarray(q, dtype=float).tolist())):
        fails = streams.numpy(STREAM, key, d).random(tries) < q_i
        if fails.all():
            lost[i] = True
        else:
            attempts[i] = int(np.argmin(fails)) + 1  # the first attempt that got through
    return attempts, lost
