"""A conversion's stop (a signal, the time limit) against the code it lands in: prints one JSON line.

usage: stop_signals.py sigterm-in-except-exception | sigterm-in-bare-except | time-limit-in-bare-except
"""

import json
import os
import signal
import sys
import time

from tessera_convert import bounds


def arrives_inside(swallow_all: bool) -> str:
    """A library's optional import (`try: ... except Exception`), or a bare `except`, with the stop landing inside it."""
    try:
        try:
            time.sleep(2)  # the signal or the alarm lands here
        except Exception:  # noqa: BLE001
            return "swallowed by except Exception"
    except:  # noqa: E722
        if swallow_all:
            return "swallowed by a bare except"
        raise
    return "slept through"


def main(case: str) -> dict:
    if case == "time-limit-in-bare-except":
        bounds.install(0.05, 0)
    else:
        bounds.install(0, 0)
        signal.setitimer(signal.ITIMER_REAL, 0.05)
        signal.signal(signal.SIGALRM, lambda *_: os.kill(os.getpid(), signal.SIGTERM))
    try:
        inside = arrives_inside(swallow_all=case != "sigterm-in-except-exception")
    except bounds.Stopped as stop:
        return {"inside": "raised", "stop": str(stop)}
    try:
        bounds.check()
    except bounds.Stopped as stop:
        return {"inside": inside, "check": str(stop)}
    return {"inside": inside, "check": None}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
