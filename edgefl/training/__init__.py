"""Where the device-side work runs: the run's learner and the executors of its training jobs.

- :mod:`.learner`: the method's steps on a real model, or the surrogate bound in their place;
- :mod:`.executors`: inline, vectorised, a local process pool or Ray actors, on the CPU or a GPU;
- :mod:`.ray_cluster`: joining or starting a Ray cluster (training jobs and sweeps).
"""
