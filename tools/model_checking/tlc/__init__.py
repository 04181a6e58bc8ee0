"""TLC in this process: :mod:`.runner` runs it through JPype and reads its output, :mod:`.tla_parse` reads the
TLA+ values it prints, :mod:`.trace_module` writes a trace as a TLA+ trace module and :mod:`.trace_validation`
has TLC check it."""
