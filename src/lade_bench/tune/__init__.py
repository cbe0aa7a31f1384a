"""``python -m lade_bench.tune``: which N, W, G (and prompt as reference, flat or trie verification) on this device?

The tuner answers with evidence, in four steps (``conf/tune.yaml`` documents every setting):

1. the device profile (forward time vs input tokens per pass), reused or measured once (``profile``);
2. a search with Optuna's TPE sampler over ``tune.space`` on a few probe samples, each configuration
   measured against AR (paired, alternating order) and pruned when the speedup bound from the device
   profile cannot beat the best measured so far (``search``, ``probe``, ``bound``); the study is a
   SQLite file in the tune folder, so a killed tune resumes;
3. the top-k of the search, declared before validation, run against AR and prompt lookup as ordinary
   cells on held-out samples the search never saw, with paired intervals, beside reference presets
   such as the paper's (``validate``);
4. a preset ``~/.config/lade_bench/lookahead/tuned/<device>-<model>.yaml`` in the user's config folder
   (``lookahead=tuned/<name>``), a JSON record of every configuration, the held-out table and the
   step-cost figure (``outputs``; the figure is drawn by ``lade_bench.report.tune_figure``).

``tune.search_from`` skips step 2 and validates an earlier tune's declared top-k instead
(``search_record``), so a committed tune's held-out cells can be run again, with their rows, on new
code without re-choosing its preset.

Modules: ``config`` (schema and checks), ``bound``, ``probe``, ``search``, ``search_record``,
``validate``, ``profile``, ``outputs`` and ``tuner`` (one tune end to end).
"""
