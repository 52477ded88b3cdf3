package admin

import (
	"fmt"
	"html/template"
	"strings"
	"time"

	"relaybot/store"
)

// series is one quantity a column chart draws per bucket: stacked on the others, or (Overlay)
// each from the axis, the later drawn over the earlier (p50 over p95).
type series struct {
	Class, Name string
	Overlay     bool
	Value       func(store.OverviewBucket) float64
	// URL is the page of the rows behind the bucket's bar.
	URL func(store.OverviewBucket) string
}

// chartSize is one drawing of a chart: wide for desktops, narrow for phones (the stylesheet
// shows one), so its text stays legible at either width.
type chartSize struct {
	class                 string
	width, height, labelW int
	// every is how many buckets one time label stands for.
	every map[string]int
}

var chartSizes = []chartSize{
	{class: "wide", width: 720, height: 190, labelW: 56, every: map[string]int{"day": 3, "month": 5}},
	{class: "narrow", width: 360, height: 170, labelW: 44, every: map[string]int{"day": 6, "month": 10}},
}

// columnChart draws one column per bucket as inline SVG, once wide and once narrow, with an HTML
// legend; every bar (and the column behind it, so a short bar is easy to tap) links to its rows.
// Colours come from the stylesheet (classes), so the page's CSP needs no inline styles.
func columnChart(id string, buckets []store.OverviewBucket, o overviewRange, ss []series, format func(float64) string) template.HTML {
	var top float64
	for _, b := range buckets {
		var stack float64
		for _, s := range ss {
			if s.Overlay {
				top = max(top, s.Value(b))
			} else {
				stack += s.Value(b)
			}
		}
		top = max(top, stack)
	}
	var out strings.Builder
	for _, size := range chartSizes {
		drawColumns(&out, id, size, buckets, o, ss, top, format)
	}
	out.WriteString(`<p class="legend muted small">`)
	for i, s := range ss {
		if i > 0 {
			out.WriteString(" · ")
		}
		fmt.Fprintf(&out, `<span class="key %s"></span> %s`, template.HTMLEscapeString(s.Class), template.HTMLEscapeString(s.Name))
	}
	out.WriteString(`</p>`)
	return template.HTML(out.String()) // every text inside is escaped
}

func drawColumns(b *strings.Builder, id string, size chartSize, buckets []store.OverviewBucket, o overviewRange, ss []series, top float64, format func(float64) string) {
	const topPad, axisH = 8, 22
	plotH := float64(size.height - topPad - axisH)
	colW := float64(size.width-size.labelW-4) / float64(max(len(buckets), 1))
	y := func(v float64) float64 {
		if top <= 0 {
			return 0
		}
		return v / top * plotH
	}
	base := float64(topPad) + plotH
	fmt.Fprintf(b, `<svg class="chart ov %s" id="chart-%s-%s" viewBox="0 0 %d %d" role="img" aria-label="%s" preserveAspectRatio="xMinYMin meet">`,
		size.class, id, size.class, size.width, size.height, template.HTMLEscapeString(id+" per "+o.Step.String()))
	fmt.Fprintf(b, `<line class="grid" x1="%d" y1="%d" x2="%d" y2="%d"/><line class="grid" x1="%d" y1="%.1f" x2="%d" y2="%.1f"/>`,
		size.labelW, topPad, size.width, topPad, size.labelW, base, size.width, base)
	fmt.Fprintf(b, `<text class="axis" x="%d" y="%d" text-anchor="end">%s</text><text class="axis" x="%d" y="%.1f" text-anchor="end">0</text>`,
		size.labelW-4, topPad+8, template.HTMLEscapeString(format(top)), size.labelW-4, base)
	for i, bk := range buckets {
		x := float64(size.labelW) + float64(i)*colW
		when := bucketLabel(bk, o)
		var total float64
		for _, s := range ss {
			total += s.Value(bk)
		}
		fmt.Fprintf(b, `<g class="col" data-bucket="%d">`, i)
		if total > 0 {
			fmt.Fprintf(b, `<a href="%s"><rect class="hit" x="%.1f" y="%d" width="%.1f" height="%.1f"><title>%s</title></rect></a>`,
				template.HTMLEscapeString(ss[0].URL(bk)), x, topPad, colW, plotH, template.HTMLEscapeString(when))
		}
		stack := base
		for _, s := range ss {
			v := s.Value(bk)
			if v <= 0 {
				continue
			}
			h := max(y(v), 1)
			y0 := stack - h
			if s.Overlay {
				y0 = base - h
			} else {
				stack = y0
			}
			fmt.Fprintf(b, `<a href="%s"><rect class="bar %s" x="%.1f" y="%.1f" width="%.1f" height="%.1f" data-value="%s"><title>%s · %s: %s</title></rect></a>`,
				template.HTMLEscapeString(s.URL(bk)), template.HTMLEscapeString(s.Class), x+colW*0.12, y0, colW*0.76, h,
				template.HTMLEscapeString(format(v)), template.HTMLEscapeString(when), template.HTMLEscapeString(s.Name), template.HTMLEscapeString(format(v)))
		}
		b.WriteString(`</g>`)
		if i%size.every[o.Name] == 0 {
			fmt.Fprintf(b, `<text class="axis" x="%.1f" y="%d">%s</text>`, x, size.height-6, template.HTMLEscapeString(tickLabel(bk.Start, o)))
		}
	}
	b.WriteString(`</svg>`)
}

// tickLabel is a bucket's start on the time axis: its hour, or its day.
func tickLabel(t time.Time, o overviewRange) string {
	if o.Step < 24*time.Hour {
		return t.UTC().Format("15:04")
	}
	return t.UTC().Format("Jan 2")
}

// bucketLabel names a bucket's span in a bar's tooltip.
func bucketLabel(b store.OverviewBucket, o overviewRange) string {
	if o.Step < 24*time.Hour {
		return b.Start.UTC().Format("Jan 2 15:04") + "–" + b.End.UTC().Format("15:04") + " UTC"
	}
	return b.Start.UTC().Format("Mon Jan 2") + " UTC"
}
