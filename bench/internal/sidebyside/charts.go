package sidebyside

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/kubetree/kubetree/bench/internal/measure"
)

// chart is one SVG written next to RESULTS.md, and what the report says of it.
type chart struct {
	file, title string
}

// writeCharts draws the charts from r into dir and returns them; a chart without data is left out.
func (r *results) writeCharts(dir string) ([]chart, error) {
	var out []chart
	for _, c := range []struct {
		chart
		draw func(string) (bool, error)
	}{
		{chart{"bench-memory.svg", "Memory against cluster size"}, r.memoryChart},
		{chart{"bench-qps-cpu.svg", "Queries per second and CPU per query"}, r.qpsCPUChart},
		{chart{"bench-propagation.svg", "Propagation latency"}, r.propagationChart},
	} {
		ok, err := c.draw(filepath.Join(dir, c.file))
		if err != nil {
			return out, fmt.Errorf("%s: %w", c.file, err)
		}
		if ok {
			out = append(out, c.chart)
			measure.Logf("wrote %s", filepath.Join(dir, c.file))
		}
	}
	return out, nil
}

// line adds a line with points; dashed for the second measure of a server.
func line(p *plot.Plot, label string, c color.Color, dashed bool, xy plotter.XYs) error {
	l, s, err := plotter.NewLinePoints(xy)
	if err != nil {
		return err
	}
	l.Color, s.Color = c, c
	l.Width = vg.Points(1.5)
	if dashed {
		l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
		s.Shape = draw.BoxGlyph{}
	} else {
		s.Shape = draw.CircleGlyph{}
	}
	p.Add(l, s)
	p.Legend.Add(label, l, s)
	return nil
}

// memoryChart: RSS growth over the idle whoami server, and the Go heap, of both plugins against
// the number of services (and endpoints) they hold.
func (r *results) memoryChart(path string) (bool, error) {
	pts := r.sizeSeries()
	if len(pts) < 2 {
		return false, nil
	}
	idle := r.memSync["whoami"].RSS
	p := measure.NewPlot("Memory after sync against cluster size",
		fmt.Sprintf("services (%d endpoints each)", r.cluster.Endpoints), "MiB")
	for _, name := range []string{"kubernetes", "kubetree"} {
		rss, heap := make(plotter.XYs, len(pts)), make(plotter.XYs, len(pts))
		for i, pt := range pts {
			rss[i] = plotter.XY{X: float64(pt.services), Y: (pt.mem[name].RSS - idle) / (1 << 20)}
			heap[i] = plotter.XY{X: float64(pt.services), Y: pt.mem[name].Heap / (1 << 20)}
		}
		if err := line(p, name+": RSS over idle CoreDNS", measure.ServerColors[name], false, rss); err != nil {
			return false, err
		}
		if err := line(p, name+": Go heap", measure.ServerColors[name], true, heap); err != nil {
			return false, err
		}
	}
	p.Y.Min, p.X.Min = 0, 0
	p.Y.Max *= 1.4 // room for the legend above the lines
	p.X.Max *= 1.05
	return true, p.Save(16*vg.Centimeter, 10*vg.Centimeter, path)
}

// qpsCPUChart: two panels side by side, QPS and CPU seconds per 100k queries, per server: a bar
// at the median of the rounds and a point per round.
func (r *results) qpsCPUChart(path string) (bool, error) {
	if len(r.runs) == 0 {
		return false, nil
	}
	panel := func(title, y string, f func(measure.RunResult) float64) (*plot.Plot, error) {
		p := measure.NewPlot(title, "", y)
		p.Legend.Top, p.Legend.Left = false, false
		med := r.perServer(f)
		for i, name := range serverNames {
			b, err := plotter.NewBarChart(plotter.Values{med[i]}, vg.Points(40))
			if err != nil {
				return nil, err
			}
			b.XMin = float64(i)
			b.Color = measure.ServerColors[name]
			b.LineStyle.Width = 0
			p.Add(b)
			var rounds plotter.XYs
			for _, x := range r.runs {
				if x.Server == name && x.Round > 0 {
					rounds = append(rounds, plotter.XY{X: float64(i), Y: f(x)})
				}
			}
			if len(rounds) > 0 {
				s, err := plotter.NewScatter(rounds)
				if err != nil {
					return nil, err
				}
				s.Shape = draw.CircleGlyph{}
				s.Color = color.Black
				s.Radius = vg.Points(2)
				p.Add(s)
			}
		}
		p.NominalX(serverNames...)
		p.Y.Min = 0
		return p, nil
	}
	qps, err := panel("Queries per second (higher is better)", "QPS", func(x measure.RunResult) float64 { return x.QPS })
	if err != nil {
		return false, err
	}
	cpu, err := panel("CPU per query (lower is better)", "CPU s per 100k queries", measure.RunResult.CPUPer100k)
	if err != nil {
		return false, err
	}
	w, h := 20*vg.Centimeter, 9*vg.Centimeter
	img := vgsvg.New(w, h)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Centimeter, PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2,
		PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	cs := plot.Align([][]*plot.Plot{{qps, cpu}}, tiles, draw.New(img))
	qps.Draw(cs[0][0])
	cpu.Draw(cs[0][1])
	return true, writeSVG(img, path)
}

// propagationChart: the distribution (empirical CDF) of the time from the API call returning to
// the answer, for creates and deletes, per plugin, on a logarithmic time axis.
func (r *results) propagationChart(path string) (bool, error) {
	if r.prop == nil || len(r.prop.create["kubetree"]) == 0 {
		return false, nil
	}
	p := measure.NewPlot(fmt.Sprintf("Propagation: API call to answer (%d services)", r.prop.n),
		"milliseconds (log scale)", "share of changes answered")
	// The curves rise steeply at the left: the legend goes to the bottom right.
	p.Legend.Top, p.Legend.Left = false, false
	p.Legend.XOffs, p.Legend.YOffs = -vg.Millimeter*14, vg.Millimeter*5
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = logTicks{}
	for _, name := range []string{"kubernetes", "kubetree"} {
		for _, k := range []struct {
			label  string
			d      []time.Duration
			dashed bool
		}{
			{"create → address", r.prop.create[name], false},
			{"delete → NXDOMAIN", r.prop.del[name], true},
		} {
			if err := line(p, name+": "+k.label, measure.ServerColors[name], k.dashed, ecdf(k.d)); err != nil {
				return false, err
			}
		}
	}
	p.Y.Min, p.Y.Max = 0, 1
	return true, p.Save(16*vg.Centimeter, 10*vg.Centimeter, path)
}

// logTicks label 1, 2 and 5 of every decade and mark the other digits, so that a range shorter
// than a decade still has labels (gonum's LogTicks label powers of ten only).
type logTicks struct{}

func (logTicks) Ticks(min, max float64) []plot.Tick {
	var ts []plot.Tick
	for e := math.Floor(math.Log10(min)); e <= math.Ceil(math.Log10(max)); e++ {
		for d := 1; d <= 9; d++ {
			v := float64(d) * math.Pow(10, e)
			if v < min || v > max {
				continue
			}
			t := plot.Tick{Value: v}
			if d == 1 || d == 2 || d == 5 {
				t.Label = strconv.FormatFloat(v, 'g', 3, 64)
			}
			ts = append(ts, t)
		}
	}
	return ts
}

// ecdf is the empirical distribution of d in milliseconds: the share of values at or below each.
// A log axis cannot show zero, so values are at least 10 µs.
func ecdf(d []time.Duration) plotter.XYs {
	v := make([]float64, len(d))
	for i, x := range d {
		v[i] = math.Max(float64(x)/float64(time.Millisecond), 0.01)
	}
	slices.Sort(v)
	xy := make(plotter.XYs, len(v))
	for i, x := range v {
		xy[i] = plotter.XY{X: x, Y: float64(i+1) / float64(len(v))}
	}
	return xy
}

func writeSVG(img *vgsvg.Canvas, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := img.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
