"""Trains the reference model when the image is built: a classifier of scikit-learn's 8x8 digits.

The images ship inside the scikit-learn package, so the weights come from a package, never from a
download at run time. Prints the held-out accuracy, so a build log says what the model is worth.
"""

import sys

import joblib
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split


def main(out: str) -> None:
    digits = load_digits()
    x_train, x_test, y_train, y_test = train_test_split(
        digits.data, digits.target, test_size=0.25, random_state=0
    )
    model = LogisticRegression(max_iter=2000).fit(x_train, y_train)
    print(f"digits classifier: held-out accuracy {model.score(x_test, y_test):.3f}")
    joblib.dump({"model": model, "features": digits.data.shape[1]}, out)


if __name__ == "__main__":
    main(sys.argv[1])
