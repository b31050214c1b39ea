"""The run layer: every chapter trains, resumes or reloads its runs through :func:`train_or_reload`.

A run is identified by its *fingerprint* (:func:`dmlnb.records.run_fingerprint`): a hash of its
resolved configuration and its method specification ``spec`` (what the configuration does not
say: the loss and its settings, the sampler, the hooks, what the chapter stores after training).
Both, and the fingerprint, are stored in the run's ``record.json``. Then :func:`train_or_reload`

* **reloads** a finished record whose fingerprint equals the one asked for (nothing is trained
  and no weights are read: the record holds everything the chapter's tables, figures and claims
  use, in ``extras``);
* **resumes** an interrupted run of the same fingerprint from its checkpoint (a run whose record
  is finished but whose ``extras`` were never written resumes at its last epoch, which trains
  nothing, and only computes them);
* **trains** from scratch otherwise, and says why (``say``): no record, a changed fingerprint
  (naming the configuration keys and specification entries that differ), a record written
  before the run layer, or ``retrain=True``. A launch (:mod:`dmlnb.launch`) retrains each run
  once: with ``retrain=True`` a record written since the launch started (``DMLNB_SHARD_SINCE``)
  is this launch's and is reloaded, so a run that several sections of a chapter ask for (one
  table's run that is also a step of an ablation) trains once; the same holds for stored
  measurements and tables. With training disabled
  (``DMLNB_NO_TRAINING=1``) that raises :class:`~dmlnb.env.TrainingDisabledError` with the
  same reason.

Measurements that are not training runs (timing studies) are stored the same way:
:func:`stored_measurement` keeps a table with the settings it was measured under and reloads it
while they match, so a re-rendered chapter quotes the stored numbers and its verdicts do not
move with the machine's load. A timing is measured with :data:`TIMING_THREADS` torch threads
whatever the process has (the thread count of the book's runs), so it does not depend on who
made it: a render with two threads and a training process with one measure the same thing, and
a table stored with another thread count is measured again. A render (``DMLNB_NO_TRAINING=1``)
measures a missing or stale table like any process, the few unstored training steps a timing
study times included (:func:`dmlnb.training.measuring`); a run with a folder still never trains
there.

The chapter supplies two functions: ``train(resume) -> (record, model)`` builds the model, loss,
sampler and hooks and calls :func:`dmlnb.training.train` (with ``spec=``), and
``finish(record, model) -> extras`` computes what is stored after training (usually from the
best-epoch weights, which exist at that moment).

**Shards.** Independent runs can train in several processes that execute the same notebook
(``python -m dmlnb train NOTEBOOK --processes N``, :mod:`dmlnb.launch`). Each process is told
its shard by the environment, ``DMLNB_SHARD="i/n"`` (:func:`current_shard`), and the folder the
shards of one launch share, ``DMLNB_SHARD_CLAIMS``. Every call of :func:`train_or_reload` with a
run folder *claims* that folder (:meth:`Shard.claim`): the first shard to ask for a run owns it,
and a run asked for again keeps its owner. So the runs are dealt out as the shards reach them,
not by a fixed rule: a shard that is done with a long run takes the next unclaimed one, and no
shard idles while runs are left that nobody has started. A run this shard owns is reloaded,
resumed or trained as above; a run another shard owns is never trained here: the call returns
at once, and the run's record is waited for on its first use (reading anything of it says so
once, then polls every :data:`POLL_SECONDS`) until it is finished with the fingerprint asked for
and holds its extras (with ``retrain=True``: written since the launch started,
``DMLNB_SHARD_SINCE``), and reloaded. So a shard trains its own runs while its siblings train
theirs, and blocks only where the notebook reads a sibling's result (a chapter that reads a
sibling run's weights reads its record first: the weights are final once the record is). No two
shards wait for each other: a shard trains a run as soon as it claims it, and the notebook reads
a run only after asking for it, so a run read at some point was claimed before that point by a
shard that trains it at once, and that training reads only runs asked for before it. A timing
study must not be measured while another process trains, so under shards
:func:`stored_measurement` measures in shard 0 alone: every other shard leaves a marker
``.waiting-<i>`` in the measurement's folder and waits for the stored table; shard 0 waits for
every marker, measures, stores the table and removes the markers
(a stored table that matches is reloaded by every shard without waiting). Tables that are not
timings (their values do not depend on the machine's load) need no idle machine:
:func:`stored_tables` hands each of a group out like a run, to the shard that claims it first,
and a shard makes the tables it claimed before it waits for those its siblings make. A waiting
shard stops with :class:`ShardError` when a sibling failed (the launcher then writes the file
named by ``DMLNB_SHARD_ABORT``) or after ``DMLNB_SHARD_TIMEOUT`` seconds (default 6 hours). Sharding
changes where a run trains, never what it computes: a run trained by a shard with one thread
equals, bit for bit on the CPU, the run trained alone with one thread.
"""

from __future__ import annotations

from dmlnb.runs.measurements import (
    EVALUATION_THREADS,
    MEASUREMENT,
    TIMING_THREADS,
    Table,
    stored_measurement,
    stored_tables,
)
from dmlnb.runs.reload import reuse_reason, train_or_reload
from dmlnb.runs.run import Run
from dmlnb.runs.shards import (
    POLL_SECONDS,
    SHARD_ABORT_ENV,
    SHARD_CLAIMS_ENV,
    SHARD_ENV,
    SHARD_SINCE_ENV,
    SHARD_TIMEOUT_ENV,
    Shard,
    ShardError,
    current_shard,
    made_by_sibling,
)

__all__ = [
    "Run",
    "train_or_reload",
    "reuse_reason",
    "stored_measurement",
    "TIMING_THREADS",
    "EVALUATION_THREADS",
    "Table",
    "stored_tables",
    "MEASUREMENT",
    "Shard",
    "ShardError",
    "current_shard",
    "made_by_sibling",
    "SHARD_ENV",
    "SHARD_CLAIMS_ENV",
    "SHARD_ABORT_ENV",
    "SHARD_SINCE_ENV",
    "SHARD_TIMEOUT_ENV",
    "POLL_SECONDS",
]
