"""A linear classifier on scikit-learn's digits, trained epoch by epoch with SGD.

The data is split once (a fixed split, whatever the seed): train, a validation set that the
search tunes on, and a test set that only the benchmark reports. Each epoch logs both
accuracies, so that a search can prune a trial from its validation curve.
"""

import argparse

import numpy as np
from sklearn.datasets import load_digits
from sklearn.linear_model import SGDClassifier
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from benchlab import log, summary

parser = argparse.ArgumentParser()
parser.add_argument("--alpha", type=float, required=True)
parser.add_argument("--eta0", type=float, required=True)
parser.add_argument("--epochs", type=int, default=15)
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()

X, y = load_digits(return_X_y=True)
X_rest, X_test, y_rest, y_test = train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)
X_train, X_val, y_train, y_val = train_test_split(X_rest, y_rest, test_size=0.3, random_state=0, stratify=y_rest)
scaler = StandardScaler().fit(X_train)
X_train, X_val, X_test = (scaler.transform(a) for a in (X_train, X_val, X_test))

model = SGDClassifier(loss="log_loss", alpha=args.alpha, learning_rate="constant", eta0=args.eta0,
                      random_state=args.seed)
classes = np.unique(y)
rng = np.random.default_rng(args.seed)
for epoch in range(args.epochs):
    order = rng.permutation(len(X_train))
    model.partial_fit(X_train[order], y_train[order], classes=classes)
    val, test = model.score(X_val, y_val), model.score(X_test, y_test)
    log(step=epoch, val_accuracy=val, test_accuracy=test)
summary(val_accuracy=val, test_accuracy=test)
print(f"alpha={args.alpha:g} eta0={args.eta0:g}: val {val:.4f} test {test:.4f}")
