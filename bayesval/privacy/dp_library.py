"""dp-accounting (Google's differential-privacy accounting library), imported on first use.

`import bayesval.privacy.dp_library as dp` then `dp.GaussianDpEvent`, `dp.rdp.RdpAccountant`,
`dp.pld.PLDAccountant`: the first attribute read imports the library (PEP 562, a module's `__getattr__`). Importing
it eagerly would cost every process about 1.3 s (its PLD accountant imports scipy.signal), which a command that
fails on its arguments, or never releases or accounts, should not pay (docs/architecture.md, "The privacy
boundary").
"""

from __future__ import annotations

import importlib
from typing import Any


def __getattr__(name: str) -> Any:
    return getattr(importlib.import_module("dp_accounting"), name)
