"""The Python model checker: TLC's breadth-first search over a spec's Python twin.

:mod:`.explorer` is the entry point (:func:`~.explorer.explore`); :mod:`.exploration` holds what a search
reports; :mod:`.levels` and :mod:`.parallel` search level by level, on one core or several;
:mod:`.frontier`, :mod:`.packing` and :mod:`.fingerprints` keep the queue, the states and the set of seen
fingerprints within memory.
"""
