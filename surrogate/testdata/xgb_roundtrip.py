#!/usr/bin/python3
"""XGBoost side of the surrogate import round trip (run by xgboost_test.go).

  xgb_roundtrip.py train SCHEMA.json DATA.csv LABEL OBJECTIVE MODEL.json PRED.txt
      trains on the rows of DATA.csv that have LABEL (an exported y.NAME or
      feasible column), saves the JSON model and XGBoost's own predictions on
      those rows (one per line).
  xgb_roundtrip.py predict SCHEMA.json MODEL.json DATA.csv PRED.txt
      predicts every row of DATA.csv with the saved model.

Feature columns are the schema's features, by name; empty cells are missing.
"""
import csv
import json
import sys

import numpy as np
import xgboost as xgb


def load(schema_path, data_path, label=None):
    names = [f["name"] for f in json.load(open(schema_path))["features"]]
    with open(data_path, newline="") as f:
        rows = list(csv.reader(f))
    header, rows = rows[0], rows[1:]
    cols = [header.index(n) for n in names]

    def num(s):
        return float("nan") if s == "" else float(s)

    X = np.array([[num(r[c]) for c in cols] for r in rows], dtype=np.float64).reshape(len(rows), len(cols))
    if label is None:
        return X, None, names
    y = np.array([num(r[header.index(label)]) for r in rows], dtype=np.float64)
    keep = ~np.isnan(y)
    return X[keep], y[keep], names


def write(path, pred):
    with open(path, "w") as f:
        for p in pred:
            f.write("%.17g\n" % float(p))


def main(argv):
    if argv[1] == "train":
        schema, data, label, objective, model, pred = argv[2:8]
        X, y, names = load(schema, data, label)
        params = {
            "objective": objective,
            "tree_method": "hist",
            "max_depth": 5,
            "eta": 0.3,
            "max_bin": 64,
            "seed": 1,
        }
        if objective == "binary:logistic":
            params["base_score"] = 0.3  # exercises the logit of base_score
        else:
            params["base_score"] = 0.25
        d = xgb.DMatrix(X, label=y, missing=np.nan, feature_names=names)
        bst = xgb.train(params, d, num_boost_round=40)
        bst.save_model(model)
        write(pred, bst.predict(xgb.DMatrix(X, missing=np.nan, feature_names=names)))
    elif argv[1] == "predict":
        schema, model, data, pred = argv[2:6]
        X, _, names = load(schema, data)
        bst = xgb.Booster()
        bst.load_model(model)
        write(pred, bst.predict(xgb.DMatrix(X, missing=np.nan, feature_names=names)))
    else:
        sys.exit("usage: see the docstring")


if __name__ == "__main__":
    main(sys.argv)
