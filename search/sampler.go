package search

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"

	"github.com/c-bata/goptuna"
	"github.com/c-bata/goptuna/tpe"
)

// Why search has its own goptuna samplers (goptuna v0.9.0, see DESIGN.md):
//   - goptuna.RandomSampler draws ints with rng.Intn(High-Low)+Low, so the
//     upper bound of an int range is never returned, and TPE's startup
//     trials inherit it;
//   - RandomSampler draws categoricals from Go's global random source and
//     tpe.Sampler picks each Parzen mixture component with the global source
//     too (internal/random.ArgMaxMultinomial), so seeded runs are not
//     reproducible.
// randomSampler and tpeSampler implement goptuna.Sampler with one seeded
// source and inclusive bounds. tpeSampler reuses goptuna's Parzen estimator,
// gamma and weights (tpe.NewParzenEstimator, tpe.DefaultGamma,
// tpe.DefaultWeights) and replaces only the sampling and the density.

var (
	_ goptuna.Sampler = (*randomSampler)(nil)
	_ goptuna.Sampler = (*tpeSampler)(nil)
)

// randomSampler samples every distribution uniformly (log-uniformly for
// log ones), bounds included, from its own seeded source.
type randomSampler struct {
	mu  sync.Mutex
	rng *rand.Rand
}

func newRandomSampler(rng *rand.Rand) *randomSampler { return &randomSampler{rng: rng} }

func (s *randomSampler) Sample(_ *goptuna.Study, _ goptuna.FrozenTrial, _ string, dist any) (float64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return sampleUniform(s.rng, dist)
}

func sampleUniform(r *rand.Rand, dist any) (float64, error) {
	switch d := dist.(type) {
	case goptuna.UniformDistribution:
		return d.Low + r.Float64()*(d.High-d.Low), nil
	case goptuna.LogUniformDistribution:
		lo, hi := math.Log(d.Low), math.Log(d.High)
		return math.Exp(lo + r.Float64()*(hi-lo)), nil
	case goptuna.IntUniformDistribution:
		return float64(d.Low + r.IntN(d.High-d.Low+1)), nil
	case goptuna.StepIntUniformDistribution:
		n := (d.High-d.Low)/d.Step + 1
		return float64(d.Low + r.IntN(n)*d.Step), nil
	case goptuna.DiscreteUniformDistribution:
		n := int(math.Floor((d.High-d.Low)/d.Q+1e-9)) + 1
		return math.Min(d.High, d.Low+float64(r.IntN(n))*d.Q), nil
	case goptuna.CategoricalDistribution:
		return float64(r.IntN(len(d.Choices))), nil
	}
	return 0, goptuna.ErrUnknownDistribution
}

// tpeSampler is the independent tree-structured Parzen estimator (Bergstra
// et al. 2011) as goptuna's tpe.Sampler runs it, from one seeded source. It
// reads and ranks the study's complete trials once and caches each
// parameter's estimators: build one sampler per study snapshot (Proposer
// does, per ask).
type tpeSampler struct {
	mu         sync.Mutex
	rng        *rand.Rand
	random     *randomSampler
	startup    int // below this many observations, sample at random
	candidates int // expected-improvement candidates per suggestion
	params     tpe.ParzenEstimatorParams
	cache      map[string]*tpeModel
	complete   []ranked // the study's complete trials, best first (nil: not read yet)
}

func newTPESampler(rng *rand.Rand, startup, candidates int) *tpeSampler {
	return &tpeSampler{
		rng:        rng,
		random:     newRandomSampler(rng),
		startup:    startup,
		candidates: max(1, candidates),
		params: tpe.ParzenEstimatorParams{
			ConsiderPrior:     true,
			PriorWeight:       1.0,
			ConsiderMagicClip: true,
			ConsiderEndpoints: false,
			Weights:           tpe.DefaultWeights,
		},
		cache: map[string]*tpeModel{},
	}
}

// tpeModel holds the below (good) and above (bad) observations of one
// parameter in internal representation, best first within each group.
type tpeModel struct {
	n              int
	below, above   []float64
	lBelow, lAbove *truncGMM // numeric only, built lazily
	pBelow, pAbove []float64 // categorical level frequencies, built lazily
	lo, hi         float64
	log            bool
}

func (s *tpeSampler) Sample(study *goptuna.Study, _ goptuna.FrozenTrial, name string, dist any) (float64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.cache[name]
	if !ok {
		var err error
		m, err = s.observe(study, name)
		if err != nil {
			return 0, err
		}
		s.cache[name] = m
	}
	if m.n < s.startup {
		return sampleUniform(s.rng, dist)
	}
	switch d := dist.(type) {
	case goptuna.UniformDistribution:
		return s.numeric(m, d.Low, d.High, false, false), nil
	case goptuna.LogUniformDistribution:
		return s.numeric(m, d.Low, d.High, true, false), nil
	case goptuna.IntUniformDistribution:
		v := s.numeric(m, float64(d.Low)-0.5, float64(d.High)+0.5, false, true)
		return math.Max(float64(d.Low), math.Min(float64(d.High), v)), nil
	case goptuna.CategoricalDistribution:
		return s.categorical(m, len(d.Choices)), nil
	}
	return sampleUniform(s.rng, dist)
}

// ranked is one complete trial's value (lower is better) and internal
// parameters.
type ranked struct {
	y      float64
	params map[string]float64
}

// trials returns the study's complete trials, best first (ties in the
// study's order), read and sorted once per sampler (a study snapshot):
// goptuna copies every trial on each read, and every parameter splits the
// same ranking.
func (s *tpeSampler) trials(study *goptuna.Study) ([]ranked, error) {
	if s.complete != nil {
		return s.complete, nil
	}
	all, err := study.GetTrials()
	if err != nil {
		return nil, err
	}
	s.complete = make([]ranked, 0, len(all))
	for _, t := range all {
		if t.State != goptuna.TrialStateComplete {
			continue
		}
		y := t.Value
		if study.Direction() == goptuna.StudyDirectionMaximize {
			y = -y
		}
		s.complete = append(s.complete, ranked{y, t.InternalParams})
	}
	slices.SortStableFunc(s.complete, func(a, b ranked) int { return cmp.Compare(a.y, b.y) })
	return s.complete, nil
}

// observe splits the complete trials that hold the parameter into the best
// gamma(n) (below) and the rest (above); lower values are better.
func (s *tpeSampler) observe(study *goptuna.Study, name string) (*tpeModel, error) {
	trials, err := s.trials(study)
	if err != nil {
		return nil, err
	}
	var xs []float64
	for _, t := range trials {
		if x, ok := t.params[name]; ok {
			xs = append(xs, x)
		}
	}
	nb := min(len(xs), tpe.DefaultGamma(len(xs)))
	m := &tpeModel{n: len(xs), below: xs[:nb:nb], above: xs[nb:]}
	return m, nil
}

// numeric draws candidates from the below mixture l(x) truncated to
// [lo, hi] and returns the one maximising l(x)/g(x).
func (s *tpeSampler) numeric(m *tpeModel, lo, hi float64, isLog, isInt bool) float64 {
	if hi <= lo {
		return lo
	}
	if m.lBelow == nil || m.lo != lo || m.hi != hi || m.log != isLog {
		tr := func(xs []float64) []float64 {
			out := make([]float64, len(xs))
			for i, x := range xs {
				if isLog {
					x = math.Log(math.Max(x, 1e-300))
				}
				out[i] = x
			}
			return out
		}
		l, h := lo, hi
		if isLog {
			l, h = math.Log(lo), math.Log(hi)
		}
		m.lBelow = newTruncGMM(mergeGMM(tpe.NewParzenEstimator(tr(m.below), l, h, s.params), maxComponents), l, h)
		m.lAbove = newTruncGMM(mergeGMM(tpe.NewParzenEstimator(tr(m.above), l, h, s.params), maxComponents), l, h)
		m.lo, m.hi, m.log = lo, hi, isLog
	}
	l, h := lo, hi
	if isLog {
		l, h = math.Log(lo), math.Log(hi)
	}
	best, bestScore := math.NaN(), math.Inf(-1)
	for range s.candidates {
		x := s.drawGMM(m.lBelow.pe, l, h)
		if isInt {
			// Score the integer the value rounds to (in linear space).
			x = math.Round(x)
		}
		score := m.lBelow.logPDF(x) - m.lAbove.logPDF(x)
		if score > bestScore || math.IsNaN(best) {
			best, bestScore = x, score
		}
	}
	if isLog {
		best = math.Exp(best)
	}
	return math.Max(lo, math.Min(hi, best))
}

// drawGMM samples the truncated mixture by rejection (falling back to a
// uniform draw when the mixture has almost no mass inside).
func (s *tpeSampler) drawGMM(pe *tpe.ParzenEstimator, lo, hi float64) float64 {
	for range 100 {
		u, k := s.rng.Float64(), 0
		for acc := 0.0; k < len(pe.Weights)-1; k++ {
			acc += pe.Weights[k]
			if u < acc {
				break
			}
		}
		x := pe.Mus[k] + pe.Sigmas[k]*s.rng.NormFloat64()
		if x >= lo && x <= hi {
			return x
		}
	}
	return lo + s.rng.Float64()*(hi-lo)
}

// maxComponents bounds a Parzen mixture: goptuna's estimator has one
// component per observation, and scoring a candidate against the "above"
// group (every observation but the best 24) grew linearly with the history,
// most of an Ask at thousands of trials. Below 64 observations nothing is
// merged, so short studies are unchanged.
const maxComponents = 64

// widthClasses is the number of width classes mergeGMM merges within.
const widthClasses = 4

// mergeGMM returns pe with at most k components. Components are split into
// widthClasses classes by width (goptuna v0.9.0's estimator pairs means with
// the widths of other components: floats.Argsort sorts the means in place
// and the permutation is then applied to them again, so neighbours in mean
// have unrelated widths), and within a class, adjacent components in mean
// are merged cheapest first: a merge keeps the pair's weight, mean and
// variance (moment matching), its cost the weighted squared distance of
// their means (Ward's criterion), so a dense region merges first.
func mergeGMM(pe *tpe.ParzenEstimator, k int) *tpe.ParzenEstimator {
	n := len(pe.Weights)
	if n <= k {
		return pe
	}
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return pe.Sigmas[order[a]] < pe.Sigmas[order[b]] })
	out := &tpe.ParzenEstimator{}
	for c := range widthClasses {
		class := order[c*n/widthClasses : (c+1)*n/widthClasses]
		sort.SliceStable(class, func(a, b int) bool { return pe.Mus[class[a]] < pe.Mus[class[b]] })
		w, mu, sd := make([]float64, len(class)), make([]float64, len(class)), make([]float64, len(class))
		for i, j := range class {
			w[i], mu[i], sd[i] = pe.Weights[j], pe.Mus[j], pe.Sigmas[j]
		}
		w, mu, sd = mergeAdjacent(w, mu, sd, max(1, k/widthClasses))
		out.Weights = append(out.Weights, w...)
		out.Mus = append(out.Mus, mu...)
		out.Sigmas = append(out.Sigmas, sd...)
	}
	return out
}

// mergeAdjacent merges components sorted by mean down to k (see mergeGMM),
// in passes of disjoint pairs.
func mergeAdjacent(w, mu, sd []float64, k int) ([]float64, []float64, []float64) {
	for len(w) > k {
		n := len(w) - 1
		cost := make([]float64, n)
		order := make([]int, n)
		for i := range n {
			dm := mu[i] - mu[i+1]
			cost[i] = w[i] * w[i+1] / (w[i] + w[i+1] + 1e-300) * dm * dm
			order[i] = i
		}
		sort.SliceStable(order, func(a, b int) bool { return cost[order[a]] < cost[order[b]] })
		merge := make([]bool, n) // merge i with i+1
		used := make([]bool, n+1)
		for left, j := len(w)-k, 0; left > 0 && j < n; j++ {
			i := order[j]
			if used[i] || used[i+1] {
				continue
			}
			used[i], used[i+1], merge[i] = true, true, true
			left--
		}
		var w2, mu2, sd2 []float64
		for i := 0; i <= n; i++ {
			if i < n && merge[i] {
				a, b := i, i+1
				ww := w[a] + w[b]
				m := (w[a]*mu[a] + w[b]*mu[b]) / ww
				v := (w[a]*(sd[a]*sd[a]+mu[a]*mu[a])+w[b]*(sd[b]*sd[b]+mu[b]*mu[b]))/ww - m*m
				w2, mu2, sd2 = append(w2, ww), append(mu2, m), append(sd2, math.Sqrt(math.Max(v, 0)))
				i++
				continue
			}
			w2, mu2, sd2 = append(w2, w[i]), append(mu2, mu[i]), append(sd2, sd[i])
		}
		w, mu, sd = w2, mu2, sd2
	}
	return w, mu, sd
}

// truncGMM is a Parzen mixture truncated to [lo, hi] with its normaliser
// computed once: the mass inside the bounds depends only on the estimator,
// and recomputing it per scored candidate was a fifth to a third of an Ask.
type truncGMM struct {
	pe      *tpe.ParzenEstimator
	logZ    float64   // log of the mixture's mass inside [lo, hi]
	sd      []float64 // component standard deviations, floored
	weightN []float64 // w_k / (sd_k sqrt(2 pi)): the density's constant per component
}

func newTruncGMM(pe *tpe.ParzenEstimator, lo, hi float64) *truncGMM {
	g := &truncGMM{pe: pe, sd: make([]float64, len(pe.Weights)), weightN: make([]float64, len(pe.Weights))}
	var z float64
	for k, w := range pe.Weights {
		sd := math.Max(pe.Sigmas[k], 1e-12)
		g.sd[k] = sd
		g.weightN[k] = w / (sd * math.Sqrt(2*math.Pi))
		z += w * (normCDF((hi-pe.Mus[k])/sd) - normCDF((lo-pe.Mus[k])/sd))
	}
	g.logZ = math.Log(z + 1e-300)
	return g
}

// logPDF is the log density at x of the truncated mixture.
func (g *truncGMM) logPDF(x float64) float64 {
	var p float64
	for k, c := range g.weightN {
		d := (x - g.pe.Mus[k]) / g.sd[k]
		p += c * math.Exp(-0.5*d*d)
	}
	return math.Log(p+1e-300) - g.logZ
}

func normCDF(x float64) float64 { return 0.5 * math.Erfc(-x/math.Sqrt2) }

// categorical draws candidates from the below level frequencies (with a
// prior) and returns the one maximising p_below/p_above.
func (s *tpeSampler) categorical(m *tpeModel, n int) float64 {
	freq := func(xs []float64) []float64 {
		p := make([]float64, n)
		w := s.params.Weights(len(xs))
		sum := 0.0
		for i := range p {
			p[i] = s.params.PriorWeight
		}
		for i, x := range xs {
			k := max(0, min(n-1, int(math.Round(x))))
			p[k] += w[i]
		}
		for _, v := range p {
			sum += v
		}
		for i := range p {
			p[i] /= sum
		}
		return p
	}
	if len(m.pBelow) != n {
		m.pBelow, m.pAbove = freq(m.below), freq(m.above)
	}
	pb, pa := m.pBelow, m.pAbove
	best, bestScore := 0, math.Inf(-1)
	for c := range s.candidates {
		u, k := s.rng.Float64(), 0
		for acc := 0.0; k < n-1; k++ {
			acc += pb[k]
			if u < acc {
				break
			}
		}
		score := math.Log(pb[k]) - math.Log(pa[k])
		if score > bestScore || c == 0 {
			best, bestScore = k, score
		}
	}
	return float64(best)
}
