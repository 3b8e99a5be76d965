package measure

import (
	"image/color"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// ServerColors are the servers' colours: each has one in every chart.
var ServerColors = map[string]color.Color{
	"kubernetes": color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	"kubetree":   color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	"whoami":     color.RGBA{R: 0x7f, G: 0x7f, B: 0x7f, A: 0xff},
}

// NewPlot is a plot with the charts' common style: a grid, plain ticks, the legend top left.
func NewPlot(title, x, y string) *plot.Plot {
	plot.DefaultFont = font.Font{Typeface: "Liberation", Variant: "Sans"}
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = x
	p.Y.Label.Text = y
	p.X.Tick.Marker = plainTicks{}
	p.Y.Tick.Marker = plainTicks{}
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.TextStyle.Font.Size = vg.Points(9)
	// Viewers substitute fonts of other widths: keep the legend off the edges.
	p.Legend.XOffs = vg.Millimeter * 3
	p.Legend.YOffs = -vg.Millimeter * 2
	p.Add(plotter.NewGrid())
	return p
}

// plainTicks are gonum's default ticks labelled without trailing zeros (5000, not 5000.00).
type plainTicks struct{}

func (plainTicks) Ticks(min, max float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(min, max)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = strconv.FormatFloat(ts[i].Value, 'f', -1, 64)
		}
	}
	return ts
}
