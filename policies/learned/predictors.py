"""Learned inputs for co-location policies: GPU utilization (Horus) and interference (OJPP).

* :class:`UtilizationPredictor` — Horus §4.1.1: a job's GPU utilization from its model graph's
  features (Table 3). Candidates: linear regression, random forest and histogram gradient
  boosting (the paper's Linear / Random Forest / LightGBM / XGBoost, within scikit-learn),
  scored by RMSLE ``sqrt(mean((ln(1 + ŷ) − ln(1 + y))²))`` on the utilization *fraction* (the
  paper's Table 4 scale is not stated, so its numbers are not comparable). Besides the file's
  features each candidate sees the batch's FLOPs and activations (``flops_g · batch_size``,
  ``activations_m · batch_size``; Horus §3.3: both grow with B × X). Predictions, also inside
  cross-validation, are clipped to ``[0.001, 1]``.
* :class:`InterferencePredictor` — OJPP §4.5, the AIP method: a worker's slowdown next to one
  partner, choosing among LinearRegression, SVR, DecisionTreeRegressor and
  KNeighborsRegressor (sklearn defaults) by cross-validated mean absolute error. Negative
  predictions are clipped to 0 (co-location is never taken to speed a job up).

Each candidate is a pipeline ``StandardScaler → regressor`` (Horus normalizes features; SVR
and k-NN need it; the others are unaffected). ``fit`` scores every candidate by shuffled,
seeded K-fold CV, keeps the best (ties: the first listed) and refits it on all rows.

Training and input data follow the CSV schemas documented in :mod:`policies.learned.profiling_data`.

Models are saved as JSON (never pickle): the chosen estimator's name and parameters, the
feature names, the CV scores, a ``synthetic`` flag and the training rows; loading refits
deterministically (fixed ``random_state``), so a loaded predictor predicts exactly as the
saved one did.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any, ClassVar, Self

import numpy as np
import numpy.typing as npt
import pandas as pd

from policies.learned.profiling_data import (
    INTERFERENCE_COLUMNS,
    UTIL_FLOOR,
    UTILIZATION_COLUMNS,
    Column,
    InvalidProfilingData,
    validate_columns,
)
from simulator.errors import located
from simulator.inputs.files import read_json

__all__ = ["InterferencePredictor", "UtilizationPredictor"]

FloatArray = npt.NDArray[np.float64]
FORMAT = "paretosearch.predictor/1"


def _scaled(model: Any, derive: Any = None) -> Any:
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import FunctionTransformer, StandardScaler

    steps = [("derive", FunctionTransformer(derive))] if derive is not None else []
    return Pipeline([*steps, ("scale", StandardScaler()), ("model", model)])


def _one_thread() -> Any:
    """Profiling sets are small: one OpenMP thread is as fast and never stalls a busy host."""
    from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]

    return threadpool_limits(limits=1, user_api="openmp")


def _per_batch(X: FloatArray) -> FloatArray:
    """Append FLOPs and activations of the whole batch (Horus §3.3: both scale with B x X)."""
    batch = X[:, 2:3]
    return np.hstack([X, X[:, 0:1] * batch, X[:, 3:4] * batch])


class _Predictor:
    """Shared contract: ``fit`` (CV model selection), ``predict``, ``save``, ``load``.

    Attributes set by ``fit`` (or ``load``): ``scores_`` (candidate name → mean CV loss, lower
    is better), ``chosen_`` (the best name), ``estimator_`` (the refitted pipeline) and
    ``synthetic_`` (trained on rows whose ``source`` is ``"synthetic"``).
    """

    KIND: ClassVar[str]
    COLUMNS: ClassVar[tuple[Column, ...]]
    METRIC: ClassVar[str]
    scores_: dict[str, float]
    chosen_: str
    estimator_: Any
    synthetic_: bool
    _rows: FloatArray

    def __init__(self, *, folds: int = 5, seed: int = 0) -> None:
        if isinstance(folds, bool) or not isinstance(folds, int) or folds < 2:
            raise InvalidProfilingData(f"folds: expected an integer >= 2, got {folds!r}")
        self.folds = folds
        self.seed = seed

    @classmethod
    def feature_names(cls) -> tuple[str, ...]:
        """The feature columns, in the order the estimator sees them."""
        return tuple(c.name for c in cls.COLUMNS[:-1])

    @staticmethod
    def candidates() -> dict[str, Any]:
        """Fresh, unfitted candidate pipelines by name, in tie-breaking order."""
        raise NotImplementedError

    def _loss(self, y: FloatArray, raw: FloatArray) -> float:
        raise NotImplementedError

    def _clip(self, raw: FloatArray) -> FloatArray:
        raise NotImplementedError

    def fit(self, frame: pd.DataFrame) -> Self:
        """Cross-validate every candidate on ``frame``, keep the best, refit it on all rows.

        Raises:
            InvalidProfilingData: a missing or bad column, or fewer rows than folds.
        """
        from sklearn.model_selection import KFold, cross_val_score

        data = validate_columns(frame, self.COLUMNS, "DataFrame")
        if len(data) < self.folds:
            raise InvalidProfilingData(f"DataFrame: expected at least {self.folds} rows "
                                       f"for {self.folds}-fold CV, got {len(data)}")
        X, y = data[:, :-1], data[:, -1]
        cv = KFold(n_splits=self.folds, shuffle=True, random_state=self.seed)

        def scorer(estimator: Any, X_: FloatArray, y_: FloatArray) -> float:
            return -self._loss(y_, np.asarray(estimator.predict(X_), dtype=float))

        with _one_thread():
            self.scores_ = {
                name: float(-cross_val_score(est, X, y, cv=cv, scoring=scorer,
                                             error_score="raise").mean())
                for name, est in self.candidates().items()}
        chosen = min(self.scores_, key=self.scores_.__getitem__)
        synthetic = "source" in frame and bool((frame["source"] == "synthetic").any())
        self._install(chosen, self.candidates()[chosen], data, synthetic)
        return self

    def _install(self, name: str, estimator: Any, data: FloatArray, synthetic: bool) -> None:
        with _one_thread():
            self.estimator_ = estimator.fit(data[:, :-1], data[:, -1])
        self.chosen_ = name
        self.synthetic_ = synthetic
        self._rows = data

    def predict(self, frame: pd.DataFrame) -> FloatArray:
        """Predict for every row of ``frame`` (which needs the feature columns only)."""
        if not hasattr(self, "estimator_"):
            raise InvalidProfilingData(f"{type(self).__name__}: call fit() or load() first")
        X = validate_columns(frame, self.COLUMNS[:-1], "DataFrame")
        with _one_thread():
            return self._clip(np.asarray(self.estimator_.predict(X), dtype=float))

    def save(self, path: str | Path) -> None:
        """Write the fitted predictor as JSON, atomically (temp file, then ``os.replace``)."""
        if not hasattr(self, "estimator_"):
            raise InvalidProfilingData(f"{type(self).__name__}: nothing to save; fit() first")
        params = self.estimator_.named_steps["model"].get_params(deep=False)
        doc = {
            "format": FORMAT, "kind": self.KIND, "estimator": self.chosen_,
            "params": params, "features": list(self.feature_names()),
            "target": self.COLUMNS[-1].name, "metric": self.METRIC,
            "cv": {"folds": self.folds, "seed": self.seed}, "scores": self.scores_,
            "synthetic": self.synthetic_, "rows": self._rows.tolist(),
        }
        text = json.dumps(doc, allow_nan=False)
        path = Path(path)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as out:
                out.write(text)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    @classmethod
    def load(cls, path: str | Path) -> Self:
        """Read a predictor written by :meth:`save`, validate it and refit it on its rows.

        Raises:
            InvalidProfilingData: unreadable JSON, a field of the wrong kind or value, or a bad
                training row (named by its 1-based index in ``rows``).
        """
        src = str(path)
        doc = read_json(path, InvalidProfilingData, "saved predictor")

        def bad(field: str, problem: str, fix: str = "") -> InvalidProfilingData:
            value = doc.get(field) if isinstance(doc, dict) else doc
            return InvalidProfilingData(located(src, column=field, value=value,
                                                problem=problem, fix=fix))

        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise bad("format", f"expected {FORMAT!r}", "write it with save()")
        if doc.get("kind") != cls.KIND:
            raise bad("kind", f"expected {cls.KIND!r}", "load it with the matching class")
        if doc.get("features") != list(cls.feature_names()):
            raise bad("features", f"expected {list(cls.feature_names())}")
        candidates = cls.candidates()
        name = doc.get("estimator")
        if name not in candidates:
            raise bad("estimator", f"expected one of {list(candidates)}")
        cv = doc.get("cv")
        if not (isinstance(cv, dict) and isinstance(cv.get("folds"), int)
                and cv["folds"] >= 2 and isinstance(cv.get("seed"), int)):
            raise bad("cv", 'expected {"folds": int >= 2, "seed": int}')
        scores = doc.get("scores")
        if not (isinstance(scores, dict) and set(scores) == set(candidates) and all(
                isinstance(v, int | float) and math.isfinite(v) for v in scores.values())):
            raise bad("scores", f"expected a finite loss for each of {list(candidates)}")
        if not isinstance(doc.get("synthetic"), bool):
            raise bad("synthetic", "expected true or false")
        params = doc.get("params")
        estimator = candidates[name]
        try:
            if not isinstance(params, dict):
                raise TypeError("not an object")
            estimator.set_params(**{f"model__{k}": v for k, v in params.items()})
        except (TypeError, ValueError) as exc:
            raise bad("params", f"not parameters of {name}: {exc}") from exc
        try:
            rows = pd.DataFrame(doc.get("rows"), columns=[c.name for c in cls.COLUMNS])
        except (TypeError, ValueError) as exc:
            raise bad("rows", f"expected a list of {len(cls.COLUMNS)}-number rows") from exc
        data = validate_columns(rows, cls.COLUMNS, f"{src} rows")
        predictor = cls(folds=cv["folds"], seed=cv["seed"])
        predictor.scores_ = {k: float(v) for k, v in scores.items()}
        predictor._install(name, estimator, data, doc["synthetic"])
        return predictor


class UtilizationPredictor(_Predictor):
    """Horus §4.1.1: GPU utilization (fraction) from model features, chosen by CV RMSLE."""

    KIND = "utilization"
    COLUMNS = UTILIZATION_COLUMNS
    METRIC = "rmsle"

    @staticmethod
    def candidates() -> dict[str, Any]:
        """Linear, random forest, histogram gradient boosting (fixed ``random_state``)."""
        from sklearn.ensemble import HistGradientBoostingRegressor, RandomForestRegressor
        from sklearn.linear_model import LinearRegression

        return {
            "linear": _scaled(LinearRegression(), _per_batch),
            "random_forest": _scaled(RandomForestRegressor(n_estimators=100, random_state=0),
                                     _per_batch),
            "hist_gradient_boosting": _scaled(HistGradientBoostingRegressor(random_state=0),
                                              _per_batch),
        }

    def _loss(self, y: FloatArray, raw: FloatArray) -> float:
        return float(np.sqrt(np.mean((np.log1p(self._clip(raw)) - np.log1p(y)) ** 2)))

    def _clip(self, raw: FloatArray) -> FloatArray:
        return np.clip(raw, UTIL_FLOOR, 1.0)


class InterferencePredictor(_Predictor):
    """OJPP §4.5 (AIP): a worker's slowdown next to a partner, chosen by CV mean abs. error."""

    KIND = "interference"
    COLUMNS = INTERFERENCE_COLUMNS
    METRIC = "mae"

    @staticmethod
    def candidates() -> dict[str, Any]:
        """The paper's four: linear, SVR, decision tree, k-nearest neighbours."""
        from sklearn.linear_model import LinearRegression
        from sklearn.neighbors import KNeighborsRegressor
        from sklearn.svm import SVR
        from sklearn.tree import DecisionTreeRegressor

        return {
            "linear": _scaled(LinearRegression()),
            "svr": _scaled(SVR()),
            "decision_tree": _scaled(DecisionTreeRegressor(random_state=0)),
            "k_neighbors": _scaled(KNeighborsRegressor()),
        }

    def _loss(self, y: FloatArray, raw: FloatArray) -> float:
        return float(np.mean(np.abs(raw - y)))  # raw: the regressor's own error, as AIP

    def _clip(self, raw: FloatArray) -> FloatArray:
        return np.maximum(raw, 0.0)
