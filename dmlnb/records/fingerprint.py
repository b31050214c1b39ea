"""What a run is before it trains: the fingerprint of its configuration and method
specification (:func:`run_fingerprint`).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from dmlnb.records.files import as_json

__all__ = ["run_fingerprint", "UNFINGERPRINTED_AT"]

#: Configuration fields added after the committed records' fingerprints were last computed, with
#: the value that trains a run as before the field existed: at that value a field is left out of
#: the fingerprint, so those records keep theirs (any other value enters it). The fields added
#: before (``compile``, ``select_on``, ``betas``, ``head_lr_scale``) are in every committed
#: fingerprint already (:data:`dmlnb.records.CONFIG_KEYS_ADDED`).
UNFINGERPRINTED_AT: dict[str, Any] = {"patience": None}


def run_fingerprint(config: Any, spec: Any) -> str:
    """16 hex digits identifying a run before it trains: a hash of its resolved configuration
    (a :class:`~dmlnb.profiles.TrainConfig` or its dict) and its method specification ``spec``
    (what the configuration does not say: the loss and its settings, the sampler, the hooks,
    what is stored after training), the fields of :data:`UNFINGERPRINTED_AT` left out at their
    neutral value. :mod:`dmlnb.runs` reloads a finished run only when the
    fingerprint of what is asked for equals the one its record was trained under."""
    config = config.to_dict() if hasattr(config, "to_dict") else config
    config = {
        k: v
        for k, v in config.items()
        if not (k in UNFINGERPRINTED_AT and v == UNFINGERPRINTED_AT[k])
    }
    payload = json.dumps({"config": as_json(config), "spec": as_json(spec)}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]
