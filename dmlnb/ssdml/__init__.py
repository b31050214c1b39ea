"""Semi-supervised deep metric learning (Dutta, Harandi and Sekhar, AAAI 2021).

* :mod:`dmlnb.ssdml.base`: the metric ``L`` and the partition-objective contract of Algorithm 1.
* :mod:`dmlnb.ssdml.graph`: kNN graphs, Laplacians, affinity propagation.
* :mod:`dmlnb.ssdml.mining`: triplets from each anchor's propagated-affinity-sorted neighbourhood.
* :mod:`dmlnb.ssdml.diagnosis`: the mining quality on fixed features against the hidden classes.
* :mod:`dmlnb.ssdml.angular`: the smooth angular objective (Eq. 3), the proposed method.
* :mod:`dmlnb.ssdml.baselines`: the five deep semi-supervised baselines of Tables 1-2.
* :mod:`dmlnb.ssdml.supervised`: the supervised baselines of Table 5 (labelled examples only).
* :mod:`dmlnb.ssdml.algorithm`: Algorithm 1, alternation over random unlabelled partitions.
* :mod:`dmlnb.ssdml.methods`: the objectives registered as methods (:mod:`dmlnb.methods`).
"""

from dmlnb.ssdml import methods  # noqa: F401  (registers the objectives as methods)
from dmlnb.ssdml.base import LinearMetric, PartitionObjective

__all__ = ["LinearMetric", "PartitionObjective"]
