"""What a run is before it trains: the fingerprint of its configuration and method
specification (:func:`run_fingerprint`).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from dmlnb.records.files import as_json

__all__ = ["run_fingerprint"]


def run_fingerprint(config: Any, spec: Any) -> str:
    """16 hex digits identifying a run before it trains: a hash of its resolved configuration
    (a :class:`~dmlnb.profiles.TrainConfig` or its dict) and its method specification ``spec``
    (what the configuration does not say: the loss and its settings, the sampler, the hooks,
    what is stored after training). :mod:`dmlnb.runs` reloads a finished run only when the
    fingerprint of what is asked for equals the one its record was trained under."""
    config = config.to_dict() if hasattr(config, "to_dict") else config
    payload = json.dumps({"config": as_json(config), "spec": as_json(spec)}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]
