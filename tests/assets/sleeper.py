"""A code location with one asset in the `heavy` pool that sleeps as long as its config says (killed-run test)."""

import time

import dagster as dg


class Nap(dg.Config):
    seconds: float = 0.0


@dg.asset(pool="heavy")
def sleeper(config: Nap) -> None:
    time.sleep(config.seconds)


defs = dg.Definitions(assets=[sleeper])
