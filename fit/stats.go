package fit

import (
	"cmp"
	"encoding/json"
	"math"
	"slices"
	"strings"
)

// Param is one inferred parameter: its value, the interval it lies in
// (95 % where a sampling model gives one; else the bounds the evidence
// sets), and the evidence it came from; or, when the capture does not tell
// it, why not (Unknown). JSON: {value, low, high, evidence} or {unknown}.
type Param struct {
	Value    float64
	Low      float64
	High     float64
	Evidence string
	Unknown  string
	// Samples is the count the value was estimated from, where one
	// (segments for a loss rate, intervals for a rate); 0 otherwise.
	Samples int
}

func known(v, lo, hi float64, evidence string) Param {
	return Param{Value: v, Low: min(lo, v), High: max(hi, v), Evidence: evidence}
}

func unknown(reason string) Param { return Param{Unknown: reason} }

// percentMax is the top of a share in percent (a parameter whose name ends
// in "_percent"): an interval from few samples reaches past it (the rule
// of three's 300/n is 300 % for one segment), a share cannot.
const percentMax = 100

// ruleOfThree is the 95 % upper bound, in percent, of a share seen in
// none of n trials (3/n), within percentMax.
func ruleOfThree(n int) float64 { return min(percentMax, 300/float64(n)) }

// clampToDomain keeps every parameter's value and interval inside what
// the parameter can be: a share ("_percent") within 0 to percentMax,
// anything else (times, rates, sizes, counts) at least 0.
func clampToDomain(ps map[string]Param) {
	for name, p := range ps {
		top := math.Inf(1)
		if strings.HasSuffix(name, "_percent") {
			top = percentMax
		}
		p.Value = min(max(p.Value, 0), top)
		p.Low = min(max(p.Low, 0), top)
		p.High = min(max(p.High, 0), top)
		ps[name] = p
	}
}

// Known says the parameter was inferred.
func (p Param) Known() bool { return p.Unknown == "" }

// MarshalJSON writes {value, low, high, evidence} or {unknown}.
func (p Param) MarshalJSON() ([]byte, error) {
	if p.Unknown != "" {
		return json.Marshal(struct {
			Unknown string `json:"unknown"`
		}{p.Unknown})
	}
	return json.Marshal(paramJSON{round(p.Value), round(p.Low), round(p.High), p.Evidence, p.Samples})
}

// paramJSON is the JSON of a known Param.
type paramJSON struct {
	Value    float64 `json:"value"`
	Low      float64 `json:"low"`
	High     float64 `json:"high"`
	Evidence string  `json:"evidence"`
	Samples  int     `json:"samples,omitempty"`
}

// UnmarshalJSON reads what MarshalJSON writes.
func (p *Param) UnmarshalJSON(b []byte) error {
	var v struct {
		paramJSON
		Unknown string `json:"unknown"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*p = Param{Value: v.Value, Low: v.Low, High: v.High, Evidence: v.Evidence, Unknown: v.Unknown, Samples: v.Samples}
	return nil
}

// round keeps six significant digits, so JSON shows no float noise (and
// writes 0 for what JSON cannot hold).
func round(v float64) float64 {
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return 0
	}
	return significant(v, 6)
}

// significant rounds v to digits significant digits.
func significant(v float64, digits int) float64 {
	if v == 0 {
		return 0
	}
	mag := math.Pow(10, float64(digits-1)-math.Floor(math.Log10(math.Abs(v))))
	return math.Round(v*mag) / mag
}

// quantile returns the q-quantile of sorted xs (nearest rank).
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// medianInterval returns the median of sorted s (nearest rank) and its
// 95 % interval by order statistics.
func medianInterval(s []float64) (med, lo, hi float64) {
	n := float64(len(s))
	lo = s[max(0, int(math.Floor(n/2-0.98*math.Sqrt(n)))-1)]
	hi = s[min(len(s)-1, int(math.Ceil(n/2+0.98*math.Sqrt(n))))]
	return quantile(s, 0.5), lo, hi
}

// trimmedMean is the mean of sorted s without its lowest and highest
// share each.
func trimmedMean(s []float64, share float64) float64 {
	k := int(float64(len(s)) * share)
	var sum float64
	for _, x := range s[k : len(s)-k] {
		sum += x
	}
	return sum / float64(len(s)-2*k)
}

func sorted(xs []float64) []float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s
}

func meanStd(xs []float64) (mean, std float64) {
	if len(xs) == 0 {
		return 0, 0
	}
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	if len(xs) < 2 {
		return mean, 0
	}
	for _, x := range xs {
		std += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(std / float64(len(xs)-1))
}

// ranks are the values' ranks (ties share their mean rank).
func ranks(v []float64) []float64 {
	idx := make([]int, len(v))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(v[a], v[b]) })
	r := make([]float64, len(v))
	for i := 0; i < len(idx); {
		j := i
		for j < len(idx) && v[idx[j]] == v[idx[i]] {
			j++
		}
		for k := i; k < j; k++ {
			r[idx[k]] = float64(i+j-1) / 2
		}
		i = j
	}
	return r
}

// pearson is the correlation of xs and ys (0 when either is constant).
func pearson(xs, ys []float64) float64 {
	mx, sx := meanStd(xs)
	my, sy := meanStd(ys)
	if sx == 0 || sy == 0 {
		return 0
	}
	var c float64
	for i := range xs {
		c += (xs[i] - mx) * (ys[i] - my)
	}
	return c / float64(len(xs)-1) / (sx * sy)
}
