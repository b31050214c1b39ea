"""The SSDML chapter (Dutta, Harandi and Sekhar, AAAI 2021): its runs declared as data
(:mod:`~dmlnb.experiments.ssdml.spec`: settings x methods x seeds, the α grid, the baselines'
search), trained or reloaded by :func:`dmlnb.chapter.train_runs` with Algorithm 1
(:mod:`~dmlnb.experiments.ssdml.procedure`), and what is this paper's own: the settings of each
profile, the reported tables and the statements computed from them, the claims, the deviations,
the Initial row and the protocol's floors, the mining diagnosis and the analyses of the runs.

``notebooks/05_ssdml.ipynb`` imports it as ``import dmlnb.experiments.ssdml as ssdml_chapter``;
every public name of the modules is here. (:mod:`dmlnb.ssdml` is the method package: the
objectives and Algorithm 1.)
"""

# ruff: noqa: F403
from dmlnb.experiments.ssdml import (
    analyses,
    claims,
    figures,
    initial,
    judges,
    mining,
    network,
    numbers,
    procedure,
    profile_settings,
    reported,
    search,
    settings,
    spec,
    tables,
    text,
    training,
)
from dmlnb.experiments.ssdml import deviations as _deviations  # its function has its name
from dmlnb.experiments.ssdml.analyses import *
from dmlnb.experiments.ssdml.claims import *
from dmlnb.experiments.ssdml.deviations import *
from dmlnb.experiments.ssdml.figures import *
from dmlnb.experiments.ssdml.initial import *
from dmlnb.experiments.ssdml.judges import *
from dmlnb.experiments.ssdml.mining import *
from dmlnb.experiments.ssdml.network import *
from dmlnb.experiments.ssdml.numbers import *
from dmlnb.experiments.ssdml.procedure import *
from dmlnb.experiments.ssdml.profile_settings import *
from dmlnb.experiments.ssdml.reported import *
from dmlnb.experiments.ssdml.search import *
from dmlnb.experiments.ssdml.settings import *
from dmlnb.experiments.ssdml.spec import *
from dmlnb.experiments.ssdml.tables import *
from dmlnb.experiments.ssdml.text import *
from dmlnb.experiments.ssdml.training import *

__all__ = [
    *analyses.__all__,
    *claims.__all__,
    *_deviations.__all__,
    *figures.__all__,
    *initial.__all__,
    *judges.__all__,
    *mining.__all__,
    *network.__all__,
    *numbers.__all__,
    *procedure.__all__,
    *profile_settings.__all__,
    *reported.__all__,
    *search.__all__,
    *settings.__all__,
    *spec.__all__,
    *tables.__all__,
    *text.__all__,
    *training.__all__,
]
