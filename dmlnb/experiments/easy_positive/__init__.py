"""The Easy Positive chapter (Xuan, Stylianou & Pless, WACV 2020), declared on the chapter layer
(:mod:`dmlnb.chapter`); ``notebooks/01_easy_positive.ipynb`` shows it.

* :mod:`.design`: the configuration per profile (:data:`PRESETS`, :func:`make_study`);
* :mod:`.spec`: the methods (:data:`METHODS`) and the runs they make (:func:`declare`), with the
  procedure that names and specifies them as the committed records do (:class:`AsRecorded`);
* :mod:`.runs`: :func:`train_chapter` (one :class:`~dmlnb.chapter.RunSet`) and what the figures
  and tables read of it;
* :mod:`.stored`: what the figures draw of a trained model, stored beside its record;
* :mod:`.diagnostics`: the worked example's terms, collapsed runs, the drop rule;
* :mod:`.judges`: what the claims read of a run, the runs they set aside, and the one test the
  vocabulary cannot say (every method of one set beats every method of another);
* :mod:`.claims`, :mod:`.section_claims`: the claims as :class:`~dmlnb.chapter.ClaimSpec`
  values;
* :mod:`.deviations`, :mod:`.setting_rows`: the departures from the paper as
  :class:`~dmlnb.chapter.Deviation` rows;
* :mod:`.reported`, :mod:`.tables`, :mod:`.figures`: the paper's numbers, the chapter's tables
  and figures; :mod:`.reading`: the numbers its closing text glues.
"""

from dmlnb.experiments.easy_positive import (
    claims,
    design,
    deviations,
    diagnostics,
    figures,
    judges,
    reading,
    reported,
    runs,
    section_claims,
    setting_rows,
    spec,
    stored,
    tables,
)
from dmlnb.experiments.easy_positive.claims import *  # noqa: F403
from dmlnb.experiments.easy_positive.design import *  # noqa: F403
from dmlnb.experiments.easy_positive.deviations import *  # noqa: F403
from dmlnb.experiments.easy_positive.diagnostics import *  # noqa: F403
from dmlnb.experiments.easy_positive.figures import *  # noqa: F403
from dmlnb.experiments.easy_positive.judges import *  # noqa: F403
from dmlnb.experiments.easy_positive.reading import *  # noqa: F403
from dmlnb.experiments.easy_positive.reported import *  # noqa: F403
from dmlnb.experiments.easy_positive.runs import *  # noqa: F403
from dmlnb.experiments.easy_positive.section_claims import *  # noqa: F403
from dmlnb.experiments.easy_positive.setting_rows import *  # noqa: F403
from dmlnb.experiments.easy_positive.spec import *  # noqa: F403
from dmlnb.experiments.easy_positive.stored import *  # noqa: F403
from dmlnb.experiments.easy_positive.tables import *  # noqa: F403

__all__ = [
    *claims.__all__,
    *design.__all__,
    *deviations.__all__,
    *diagnostics.__all__,
    *figures.__all__,
    *judges.__all__,
    *reading.__all__,
    *reported.__all__,
    *runs.__all__,
    *section_claims.__all__,
    *setting_rows.__all__,
    *spec.__all__,
    *stored.__all__,
    *tables.__all__,
]
