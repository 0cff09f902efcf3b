"""The run's radio: where devices are each round and what uplink (and downlink) rate they get (built on
``channel/``). The downlink (``[channel.downlink]``) sees the same gains as the uplink (path loss, shadowing,
fading: one block per round) with the base station's power on its own FDMA sub-bands. Both use the scenario's
``channel.link_model`` (``"truncated_shannon"``: each with its own direction's parameters). Every consumer of a
rate (the cost model, each method's plan, the preflight check) reads it from here.

Streams: ``placement`` (initial positions), ``mobility`` per round, ``fading`` per round. Round 1 uses the
initial placement; mobility moves devices before every later round.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from channel import RadioModel, RandomWalk, Redraw, Static, distances_m, uniform_disk
from edgefl.scenario.sections import ChannelConfig
from edgefl.seeding import Streams

__all__ = ["Radio", "radio_model"]


def radio_model(cfg: ChannelConfig) -> RadioModel:
    """The channel package's RadioModel for a scenario's channel section; its noise PSD includes the section's
    interference over thermal (``interference_db``)."""
    return RadioModel(
        pathloss=cfg.pathloss,
        exponent=cfg.exponent,
        ref_distance_m=cfg.ref_distance_m,
        ref_loss_db=cfg.ref_loss_db,
        carrier_hz=cfg.carrier_hz,
        shadowing_sigma_db=cfg.shadowing_db,
        rayleigh=cfg.rayleigh,
        # inter-cell interference as a rise over thermal noise: N0 10^(IoT/10) (x 1.0, the same N0, at 0 dB)
        noise_psd_w_per_hz=cfg.noise_psd_w_per_hz * 10.0 ** (cfg.interference_db / 10.0),
        bandwidth_mode=cfg.bandwidth_mode,
        band_hz=cfg.bandwidth_hz,
        link_model=cfg.link_model,
        link_direction="uplink",
        access=cfg.access,
    )


class Radio:
    """Positions, gains and rates of ``n_devices`` over the rounds of one run.

    ``floor_m``: the closest a device is taken to be to the antenna [m] (``channel.min_distance_m``, at least 1 m);
    ``moving``: whether devices move between rounds (any ``channel.mobility`` but ``"static"``).
    """

    def __init__(self, cfg: ChannelConfig, n_devices: int, streams: Streams) -> None:
        self.model = radio_model(cfg)
        dl = cfg.downlink
        self.downlink = None if dl is None else replace(
            self.model, band_hz=dl.bandwidth_hz, bandwidth_mode=dl.bandwidth_mode, link_direction="downlink",
            access="fdma",
        )  # the uplink's gains, noise and link model, with the downlink's band and link parameters
        self.bs_power_w = None if dl is None else dl.tx_power_w
        self.streams = streams
        self.moving = cfg.mobility != "static"
        if not self.moving:
            self.mobility = Static()
        elif cfg.mobility == "redraw":
            self.mobility = Redraw(radius_m=cfg.cell_radius_m, min_distance_m=cfg.min_distance_m)
        else:
            self.mobility = RandomWalk(
                step_m=cfg.walk_step_m, radius_m=cfg.cell_radius_m, min_distance_m=cfg.min_distance_m
            )
        self.positions_m = uniform_disk(
            streams.numpy("placement"), n_devices, radius_m=cfg.cell_radius_m, min_distance_m=cfg.min_distance_m
        )
        # distance 0 has infinite gain; keep every device at least 1 m from the antenna
        self.floor_m = max(cfg.min_distance_m, 1.0)
        self._round = 1

    def round_state(self, round_index: int) -> tuple[np.ndarray, np.ndarray]:
        """(distance [m], channel power gain [linear]) of every device in round ``round_index`` (1-based).

        Rounds must be visited in order; mobility steps use the (mobility, round) stream.
        """
        while self._round < round_index:
            self._round += 1
            self.positions_m = self.mobility.step(self.positions_m, self.streams.numpy("mobility", self._round))
        d = np.maximum(distances_m(self.positions_m), self.floor_m)
        return d, self.model.gain_linear(d, self.streams.numpy("fading", round_index))

    def state_dict(self) -> dict:
        """What mobility has changed so far (checkpoints): the round reached and the positions [m]."""
        return {"radio_round": self._round, "positions_m": self.positions_m.tolist()}

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict` (a resumed run continues the same trajectories)."""
        self.positions_m = np.asarray(state["positions_m"], dtype=float).reshape(self.positions_m.shape)
        self._round = int(state["radio_round"])

    def rates_bps(
        self, gain: np.ndarray, tx_power_w: np.ndarray, transmitting: np.ndarray | None = None, *, held: int = 0
    ) -> np.ndarray:
        """Uplink rate [bit/s] per device under ``channel.link_model``, shape (n,) (of ``gain``, ``tx_power_w``);
        0 for devices not ``transmitting`` (bool shape (n,); None: all transmit). ``held``: sub-bands still taken
        by devices finishing an earlier job (they share the band under ``bandwidth_mode = "split"``). A device's rate
        depends only on its own gain and power and on how many share the band, so the rates of the transmitting
        devices alone (their gains, no mask) are the same numbers."""
        return self.model.rates_bps(gain, tx_power_w, transmitting, held=held)

    @property
    def tdma(self) -> bool:
        """Whether uploads take turns on the whole band (``channel.access = "tdma"``)."""
        return self.model.access == "tdma"

    def packet_error_rate(
        self, gain: np.ndarray, tx_power_w: np.ndarray, n_transmitting: int, *, held: int = 0, waterfall: float,
        band_hz: np.ndarray | None = None, interference_w: np.ndarray | float = 0.0,
    ) -> np.ndarray:
        """Chen et al.'s packet error rate of each upload (2021, eq. (9) on this round's channel, reused from
        :func:`optimizers.chen_assignment.packet_error_rate`): ``q = 1 - exp(-m B N0 / (P h))`` on the band
        ``B`` each of ``n_transmitting`` devices uploads on (:meth:`channel.RadioModel.upload_band_hz`), with the
        noise PSD N0 that already holds the interference rise, so ``q = 1 - exp(-m / SINR)`` at the SINR of its
        rate. ``gain``, ``tx_power_w``: the uploading devices', shape (m,); ``waterfall``: m [linear]; ``band_hz``:
        each upload's own band [Hz], shape (m,), where an allocation or Chen et al.'s RBs set it (None: the share
        above); ``interference_w``: I [W] each upload receives on top of that noise, shape (m,) or one number
        (Chen et al.'s I_n of its RB, ``[selection.chen]``; default 0), so ``q = 1 - exp(-m (I + B N0) / (P h))``."""
        from optimizers.chen_assignment import packet_error_rate  # scipy loads only for runs with packet errors

        if gain.size == 0:
            return np.zeros(0)
        n0 = self.model.noise_psd_w_per_hz
        if band_hz is None:
            band_hz = self.model.upload_band_hz(n_transmitting, held=held)
            return packet_error_rate(tx_power_w, gain, interference_w, rb_bandwidth_hz=band_hz,
                                     noise_psd_w_per_hz=n0, waterfall=waterfall)  # fmt: skip
        # a band per upload: the solver takes one B, so each upload's noise B N0 joins its I over a unit band
        noise_w = np.asarray(interference_w, dtype=float) + np.asarray(band_hz, dtype=float) * n0
        return packet_error_rate(tx_power_w, gain, noise_w, rb_bandwidth_hz=1.0, noise_psd_w_per_hz=0.0,
                                 waterfall=waterfall)  # fmt: skip

    def downlink_rates_bps(self, gain: np.ndarray, receiving: np.ndarray | None = None) -> np.ndarray:
        """Downlink rate [bit/s] per device, shape (n,) (of ``gain``), under ``channel.link_model`` (``"shannon"``:
        AnycostFL eq. (8)) with the base station's power on each receiving device's downlink sub-band (shared
        among the ``receiving`` devices, bool shape (n,), under ``"split"``; None: all receive); 0 for the
        others. Only with ``[channel.downlink]``."""
        if self.downlink is None:
            raise ValueError("downlink_rates_bps: the scenario has no [channel.downlink]")
        return self.downlink.rates_bps(gain, self.bs_power_w, receiving)
