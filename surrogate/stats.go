package surrogate

import (
	"math"
	"sort"
)

// rSquared is 1 - SSE/SST (0 when the labels are constant).
func rSquared(pred, y []float64) float64 {
	if len(y) == 0 {
		return 0
	}
	var mean float64
	for _, v := range y {
		mean += v
	}
	mean /= float64(len(y))
	var sse, sst float64
	for i := range y {
		sse += (pred[i] - y[i]) * (pred[i] - y[i])
		sst += (y[i] - mean) * (y[i] - mean)
	}
	if sst == 0 {
		return 0
	}
	return 1 - sse/sst
}

// MAPE is the mean absolute percentage error (a fraction; rows with y == 0
// are skipped).
func MAPE(pred, y []float64) float64 {
	var s float64
	n := 0
	for i := range y {
		if y[i] == 0 {
			continue
		}
		s += math.Abs(pred[i]-y[i]) / math.Abs(y[i])
		n++
	}
	if n == 0 {
		return 0
	}
	return s / float64(n)
}

// AUC is the area under the ROC curve of scores against 0/1 labels (the
// Mann-Whitney statistic, ties counted half). 0.5 when one class is absent.
func AUC(score, label []float64) float64 {
	idx := make([]int, len(score))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return score[idx[a]] < score[idx[b]] })
	ranks := midRanks(score, idx)
	var pos, sumPos float64
	for i, l := range label {
		if l == 1 {
			pos++
			sumPos += ranks[i]
		}
	}
	neg := float64(len(label)) - pos
	if pos == 0 || neg == 0 {
		return 0.5
	}
	return (sumPos - pos*(pos+1)/2) / (pos * neg)
}

// midRanks returns 1-based ranks with ties given their mean rank; idx sorts v.
func midRanks(v []float64, idx []int) []float64 {
	r := make([]float64, len(v))
	for i := 0; i < len(idx); {
		j := i
		for j+1 < len(idx) && v[idx[j+1]] == v[idx[i]] {
			j++
		}
		mid := float64(i+j)/2 + 1
		for k := i; k <= j; k++ {
			r[idx[k]] = mid
		}
		i = j + 1
	}
	return r
}

// Spearman is the rank correlation of a and b (ties by mid-rank).
func Spearman(a, b []float64) float64 {
	rank := func(v []float64) []float64 {
		idx := make([]int, len(v))
		for i := range idx {
			idx[i] = i
		}
		sort.SliceStable(idx, func(x, y int) bool { return v[idx[x]] < v[idx[y]] })
		return midRanks(v, idx)
	}
	return pearson(rank(a), rank(b))
}

func pearson(a, b []float64) float64 {
	n := float64(len(a))
	if n < 2 {
		return 0
	}
	var ma, mb float64
	for i := range a {
		ma += a[i]
		mb += b[i]
	}
	ma /= n
	mb /= n
	var sab, saa, sbb float64
	for i := range a {
		sab += (a[i] - ma) * (b[i] - mb)
		saa += (a[i] - ma) * (a[i] - ma)
		sbb += (b[i] - mb) * (b[i] - mb)
	}
	if saa == 0 || sbb == 0 {
		return 0
	}
	return sab / math.Sqrt(saa*sbb)
}
