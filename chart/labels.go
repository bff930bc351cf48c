package chart

import (
	"cmp"
	"slices"
)

// Label placement: the labels beside markers (VRAM on front members, the
// names of vLLM's default and the recommended config) are placed once, in
// the figure's own terms, so that the SVG and the HTML put each one on the
// same side of its marker and no two overlap. A label that fits nowhere is
// left out (its point still shows it on hover).

// Side is where a label sits against its marker.
type Side int

const (
	Hidden Side = iota
	Right
	Above
	Left
	Below
)

// box is a rectangle in pixels, y down.
type box struct{ x0, y0, x1, y1 float64 }

func (a box) overlaps(b box) bool { return a.x0 < b.x1 && b.x0 < a.x1 && a.y0 < b.y1 && b.y0 < a.y1 }

// labelFont is the label's size in pixels: ECharts' default 12 px text;
// each character about 0.6 of it wide.
const labelFont = 12.0

// labelBox is the box of text on side of a marker of diameter size at
// (x, y).
func labelBox(text string, side Side, x, y, size float64) box {
	w, h := 0.6*labelFont*float64(len([]rune(text))), labelFont+2
	gap := size/2 + 4
	switch side {
	case Right:
		return box{x + gap, y - h/2, x + gap + w, y + h/2}
	case Left:
		return box{x - gap - w, y - h/2, x - gap, y + h/2}
	case Above:
		return box{x - w/2, y - gap - h, x + w/2, y - gap}
	default:
		return box{x - w/2, y + gap, x + w/2, y + gap + h}
	}
}

// placeLabels returns the side of every labelled point of a laid-out panel
// drawn w by h pixels, keyed by series and point index: series with fewer
// points first (the named markers), each label on the first side that
// stays inside the panel and clear of every marker and earlier label.
func placeLabels(p *Panel, w, h float64) map[[2]int]Side {
	px := func(q Point) (float64, float64) {
		return (q.X - p.X.Min) / (p.X.Max - p.X.Min) * w, (1 - (q.Y-p.Y.Min)/(p.Y.Max-p.Y.Min)) * h
	}
	var taken []box
	for _, s := range p.Series {
		for _, q := range s.Points {
			if s.Marker.Shape != NoMarker && !q.Missing {
				x, y := px(q)
				r := s.Marker.Size/2 + 1
				taken = append(taken, box{x - r, y - r, x + r, y + r})
			}
		}
	}
	order := make([]int, len(p.Series))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(len(p.Series[a].Points), len(p.Series[b].Points)) })
	out := map[[2]int]Side{}
	for _, si := range order {
		s := p.Series[si]
		for pi, q := range s.Points {
			if q.Label == "" || q.Missing {
				continue
			}
			x, y := px(q)
			out[[2]int{si, pi}] = Hidden
		sides:
			for _, side := range []Side{Right, Above, Left, Below} {
				b := labelBox(q.Label, side, x, y, s.Marker.Size)
				if b.x0 < 0 || b.y0 < 0 || b.x1 > w || b.y1 > h {
					continue
				}
				for _, t := range taken {
					if t.overlaps(b) {
						continue sides
					}
				}
				taken = append(taken, b)
				out[[2]int{si, pi}] = side
				break
			}
		}
	}
	return out
}
