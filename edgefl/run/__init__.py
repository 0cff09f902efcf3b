"""A run from a scenario: build it, check it before round 1, drive it, checkpoint and resume it.

- :mod:`.runner`: ``build_run``, the :class:`~edgefl.run.runner.Simulation` stepped round by round, ``run_scenario``;
- :mod:`.preflight`: can any device ever finish a job under the round's rules;
- :mod:`.checkpoint`: checkpoints between rounds and the resume that reads them;
- :mod:`.fleet_export`: a scenario's fleet as a device table, and a scenario run on a DataFrame.
"""
