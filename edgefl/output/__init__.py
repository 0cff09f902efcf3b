"""What a run leaves behind: its tables, summary, report and the comparison page of several runs.

- :mod:`.results`: the :class:`~edgefl.output.results.RunResult` and the run directory (``write_run``);
- :mod:`.device_rounds_file`: ``device_rounds.csv`` or ``.parquet``;
- :mod:`.report`, :mod:`.report_header`, :mod:`.report_marks`, :mod:`.report_scale`: the HTML report of one run;
- :mod:`.comparison`: ``edgefl plot``, several runs in one page;
- :mod:`.targets`: time and energy to a target accuracy; :mod:`.run_info`: what names a run and its settings.
"""
