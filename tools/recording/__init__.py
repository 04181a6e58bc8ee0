"""Recordings of the real systems: :mod:`.real_systems` runs the scenarios on the real jars, maps and checks them."""
