// Package surrogate predicts a config's objectives and failure risk: feature
// encoding, a GBDT trainer that writes LightGBM text models, and inference
// through github.com/dmitryikh/leaves only.
package surrogate
