package measure

import (
	"bufio"
	"fmt"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

// scrape opens the prometheus plugin's /metrics, to be read a line at a time; done closes it.
func (s *Server) scrape() (sc *bufio.Scanner, done func() error, err error) {
	hc := &http.Client{Timeout: 5 * time.Second}
	resp, err := hc.Get("http://" + s.metrics + "/metrics")
	if err != nil {
		return nil, nil, err
	}
	sc = bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	return sc, resp.Body.Close, nil
}

// metric is the value of an unlabelled metric from the prometheus plugin.
func (s *Server) metric(name string) (float64, error) {
	sc, done, err := s.scrape()
	if err != nil {
		return 0, err
	}
	defer done()
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, fmt.Errorf("metric %s not found", name)
}

// Buckets is a Prometheus histogram, every series of it summed: observations at most le, by le.
type Buckets map[float64]float64

// Histogram reads a histogram from the prometheus plugin, its series summed.
func (s *Server) Histogram(name string) (Buckets, error) {
	sc, done, err := s.scrape()
	if err != nil {
		return nil, err
	}
	defer done()
	b := Buckets{}
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), name+"_bucket{")
		if !ok {
			continue
		}
		_, rest, ok := strings.Cut(line, `le="`)
		if !ok {
			continue
		}
		le, value, ok := strings.Cut(rest, `"}`)
		if !ok {
			continue
		}
		bound, err1 := strconv.ParseFloat(le, 64)
		v, err2 := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%s: bad bucket %q", name, sc.Text())
		}
		b[bound] += v
	}
	return b, sc.Err()
}

// Minus is what was observed since before.
func (b Buckets) Minus(before Buckets) Buckets {
	out := Buckets{}
	for le, v := range b {
		out[le] = v - before[le]
	}
	return out
}

// Count is how many observations there are.
func (b Buckets) Count() int { return int(b[math.Inf(1)]) }

// Quantile is the q-quantile as Prometheus's histogram_quantile estimates it: linear within the
// bucket it falls in; -1 when nothing was observed.
func (b Buckets) Quantile(q float64) time.Duration {
	bounds := make([]float64, 0, len(b))
	for le := range b {
		bounds = append(bounds, le)
	}
	sort.Float64s(bounds)
	total := b[math.Inf(1)]
	if total == 0 || len(bounds) < 2 {
		return -1
	}
	rank := q * total
	lower, below := 0.0, 0.0
	for _, le := range bounds {
		if b[le] >= rank {
			if math.IsInf(le, 1) {
				return time.Duration(lower * float64(time.Second))
			}
			in := b[le] - below
			at := lower + (le-lower)*(rank-below)/in
			return time.Duration(at * float64(time.Second))
		}
		lower, below = le, b[le]
	}
	return -1
}
