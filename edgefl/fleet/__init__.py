"""The devices of a run and what their work costs.

- :mod:`.devices`: the :class:`~edgefl.fleet.devices.Fleet` (per-device arrays) and its drawn columns;
- :mod:`.build`: a run's fleet from its sources (device table, profiles, the scenario's own keys, draws);
- :mod:`.availability`: when each device is online;
- :mod:`.links`: the run's radio links (positions, uplink and downlink rates each round, on ``channel/``);
- :mod:`.costs`: the one cost model (time and energy of compute and upload, planned and charged);
- :mod:`.allocation`: a round's radio resource allocation (``channel.allocation``: each device's sub-band, transmit
  power and CPU frequency, :func:`~edgefl.fleet.allocation.allocate`), planned with the cost model;
- :mod:`.anycost_input`: a device table as the AnycostFL optimizer's input (``edgefl optimize anycost``).
"""
