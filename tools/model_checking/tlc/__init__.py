"""TLC in this process: :mod:`.runner` runs it through JPype, :mod:`.output` reads its verdict and errors,
:mod:`.tla_parse` the TLA+ values it prints; :mod:`.trace_module` writes a trace as a TLA+ trace module and
:mod:`.trace_validation` has TLC check it."""
