"""Model checking a spec, by two engines that must agree.

- :mod:`.explorer`: the Python model checker, breadth first over a spec's Python twin;
- :mod:`.tlc`: TLC, run in this process through JPype, its output read, and trace validation on it;
- :mod:`.model_check`: one model on either engine or both, and their results compared state for state.
"""
