"""What the user writes, read and checked: the scenario file and its sections, the device table, the catalogue.

- :mod:`.loading`: the :class:`~edgefl.scenario.loading.Scenario` model, TOML files, presets and ``--set`` overrides;
- :mod:`.sections`: the ``[data]``, ``[model]``, ``[train]``, ``[round]``, ``[fleet]``, ``[channel]``,
  ``[surrogate]`` and ``[output]`` sections, units converted at load;
- :mod:`.section_base`: the base of every section and of each method's settings model;
- :mod:`.luo_settings`: the ``[method.luo]`` table of ``edgefl design ke``;
- :mod:`.limits`: the physically possible range of each field; :mod:`.did_you_mean`: the nearest valid key;
- :mod:`.device_table`: the user's device table (CSV, Parquet or a DataFrame); :mod:`.data_sizes`: its data sizes;
- :mod:`.catalogue`: the device catalogue (``edgefl/data/devices.toml``);
- :mod:`.physics`: ``physics = "paper"`` or ``"realistic"`` and the realistic physics' defaults.

Nothing here imports the methods, the fleet, the engine or torch.
"""
