// Package surrogate predicts, for a config in a context (model, GPU,
// workload), each objective (output throughput, a latency metric, peak
// VRAM) and the chance that the config fails to start (OOM, KV cache too
// small): the model the search uses to decide which candidates are worth a
// GPU restart.
//
// It owns:
//   - the feature schema (features.go): a versioned list of columns, stored
//     with every model. Every active parameter of a space (log for
//     log-scaled ones, one-hot for categoricals, 0/1 for bools), the target's
//     facts (model size and shape, KV bytes per token, GPU memory,
//     bandwidth, TFLOPS, GPU count, max_model_len), the workload's (mean and
//     p90 prompt and output length from its request stream, rate or
//     concurrency) and roofline estimates derived from them (weights per GPU,
//     KV capacity, decode batch, step time, throughput, VRAM) so that history
//     from one model or GPU informs another. Objectives are learnt as
//     log(metric / estimate).
//   - a GBDT trainer (train.go): quantile-binned histograms, leaf-wise
//     growth, squared and logistic loss, shrinkage, depth and leaf limits,
//     min data and hessian per leaf, L2, row and column subsampling, early
//     stopping, seeded. It writes LightGBM's v3 text format (lgbm.go).
//   - the validator of LightGBM text models and the converter of XGBoost
//     JSON models (xgboost.go) into that format. Nothing reaches leaves
//     without passing the validator; leaves only ever parses text this
//     package wrote. XGBoost binary files are refused (leaves'
//     XGEnsembleFromFile exhausts memory on XGBoost >= 1.0 binaries).
//   - Surrogate (surrogate.go): a bagged ensemble (bootstrap members that
//     stop early on their out-of-bag rows) per objective plus a feasibility
//     classifier; Predict gives mean, spread and P(feasible). Scaled is
//     the model of a history too short for trees: the roofline times the
//     measured samples' mean ratio to it. All
//     inference goes through github.com/dmitryikh/leaves. Marshal/Unmarshal
//     make one JSON blob (schema, LightGBM texts, training metrics) for the
//     store.
//   - Import/Merge of external models, ExportData (CSV/libsvm training
//     matrix with its schema file) and Evaluate (k-fold cross-validated
//     R^2/MAPE/Spearman per objective, AUC of feasibility).
//
// Typical use (package search):
//
//	schema := surrogate.NewSchema(resolvedSpace)
//	s, err := surrogate.Train(schema, samples, surrogate.DefaultOptions())
//	preds := s.PredictConfigs(target, workload, candidates) // or s.Predict(s.Schema.Encoder(target, w).EncodeAll(cfgs))
//	blob, err := s.Marshal()                                // store.PutModel
package surrogate
