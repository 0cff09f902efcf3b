"""The run's clock and the two drivers that play it.

- :mod:`.clock`: one SimPy environment for the whole run, device states driven by its events;
- :mod:`.driver`: what a driver plays (:class:`~edgefl.engine.driver.Run`) and the driver protocol;
- :mod:`.round_rules`: the rules of every round, resolved once at build time;
- :mod:`.round_steps`: the steps both drivers share (selection, downloads, charges, the rounds row);
- :mod:`.sync_driver`: rounds; :mod:`.async_driver`: asynchronous server updates (FedAsync, FedBuff);
- :mod:`.run_state`: the state between rounds, as a value; :mod:`.records`: each round's rows and the tables.
"""
