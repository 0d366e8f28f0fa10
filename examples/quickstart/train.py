"""Train one classifier on one of scikit-learn's bundled datasets and report to benchlab.

One run = one (task, model, seed): the dataset is split into train / validation /
test (stratified, seeded by ``--seed``), features are standardised on the
training part, and the model is trained epoch by epoch with ``partial_fit``.
After every epoch it logs ``val_accuracy`` and ``train_loss`` with
``benchlab.log``; at the end ``benchlab.summary`` records the test ``accuracy``
and ``fit_time`` (seconds spent inside ``partial_fit``, evaluation excluded).

The datasets ship inside scikit-learn, so nothing is downloaded::

    python train.py --task digits --model mlp --seed 0 --epochs 20

Outside benchlab the metrics files land in the current directory (or in
``$BENCHLAB_RUN_DIR`` when it is set).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np

# Only what the run needs: importing scikit-learn costs about a second, which is
# most of a run here, so the model classes are imported in ``make_model``.
from sklearn.datasets import load_breast_cancer, load_digits, load_wine
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from benchlab import log, summary

DATASETS = {"digits": load_digits, "wine": load_wine, "breast_cancer": load_breast_cancer}
MODELS = ("logreg", "linear_svm", "mlp")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--task", choices=sorted(DATASETS), required=True)
    p.add_argument("--model", choices=MODELS, required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--lr", type=float, default=0.01,
                   help="initial learning rate (SGD eta0, MLP learning_rate_init)")
    p.add_argument("--alpha", type=float, default=1e-4, help="L2 penalty")
    p.add_argument("--hidden", type=int, default=64, help="MLP hidden units")
    p.add_argument("--batch-size", type=int, default=64, help="MLP minibatch size")
    p.add_argument("--test-size", type=float, default=0.25)
    p.add_argument("--val-size", type=float, default=0.2, help="fraction of the training part")
    return p.parse_args(argv)


def split(task: str, seed: int, test_size: float, val_size: float) -> tuple[np.ndarray, ...]:
    """(x_train, y_train, x_val, y_val, x_test, y_test), features standardised on x_train.

    x_*: float64 (n, n_features); y_*: int (n,).
    """
    data = DATASETS[task]()
    x, y = data.data.astype(np.float64), data.target
    x_rest, x_test, y_rest, y_test = train_test_split(
        x, y, test_size=test_size, stratify=y, random_state=seed)
    x_train, x_val, y_train, y_val = train_test_split(
        x_rest, y_rest, test_size=val_size, stratify=y_rest, random_state=seed)
    scaler = StandardScaler().fit(x_train)
    return (scaler.transform(x_train), y_train, scaler.transform(x_val), y_val,
            scaler.transform(x_test), y_test)


def make_model(args: argparse.Namespace, rng: np.random.RandomState) -> Any:
    # A RandomState instance (not an int) so each partial_fit call draws fresh
    # numbers instead of replaying the first epoch's.
    if args.model == "mlp":
        from sklearn.neural_network import MLPClassifier

        return MLPClassifier(hidden_layer_sizes=(args.hidden,), alpha=args.alpha,
                             learning_rate_init=args.lr, batch_size=args.batch_size,
                             random_state=rng)
    from sklearn.linear_model import SGDClassifier

    loss = "log_loss" if args.model == "logreg" else "hinge"
    return SGDClassifier(loss=loss, alpha=args.alpha, learning_rate="constant",
                         eta0=args.lr, random_state=rng)


def train_loss(model: Any, kind: str, x: np.ndarray, y: np.ndarray) -> float:
    """Mean training loss of the model as it stands: cross-entropy, or one-vs-rest hinge."""
    if kind == "linear_svm":
        scores = model.decision_function(x)
        if scores.ndim == 1:  # binary: one score, positive means classes_[1]
            sign = np.where(y == model.classes_[1], 1.0, -1.0)
            return float(np.maximum(0.0, 1.0 - sign * scores).mean())
        sign = np.where(y[:, None] == model.classes_[None, :], 1.0, -1.0)
        return float(np.maximum(0.0, 1.0 - sign * scores).mean())
    proba = model.predict_proba(x)
    picked = proba[np.arange(len(y)), np.searchsorted(model.classes_, y)]
    return float(-np.log(np.clip(picked, 1e-15, None)).mean())


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    rng = np.random.RandomState(args.seed)
    np.random.seed(args.seed)
    x_train, y_train, x_val, y_val, x_test, y_test = split(
        args.task, args.seed, args.test_size, args.val_size)
    model = make_model(args, rng)
    classes = np.unique(y_train)

    fit_time = 0.0
    for epoch in range(1, args.epochs + 1):
        order = rng.permutation(len(y_train))
        start = time.perf_counter()
        model.partial_fit(x_train[order], y_train[order], classes=classes)
        fit_time += time.perf_counter() - start
        log(step=epoch,
            val_accuracy=float(model.score(x_val, y_val)),
            train_loss=train_loss(model, args.model, x_train, y_train))

    accuracy = float(model.score(x_test, y_test))
    summary(accuracy=accuracy, fit_time=fit_time)
    print(f"{args.task} {args.model} seed={args.seed}: test accuracy {accuracy:.4f}, "
          f"fit {fit_time:.3f}s over {args.epochs} epochs "
          f"({len(y_train)} train / {len(y_val)} val / {len(y_test)} test)")


if __name__ == "__main__":
    main()
